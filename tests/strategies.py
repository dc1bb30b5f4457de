"""The one module of shared Hypothesis strategies (claims, inventories, windows, fleets).

Every test that needs generated values imports them from here, so a value's shape is defined once.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from fleetgate.domain.capacity.demand import MIN_DEMAND_PER_VCPU
from fleetgate.domain.capacity.denials import Denial, DimensionDetail, Stage
from fleetgate.domain.capacity.dimensions import Resources
from fleetgate.domain.capacity.model import ClusterState
from fleetgate.domain.rotation.derive import DeriveInputs
from fleetgate.domain.rotation.policy import ForcefulFallback, RotationPolicy, Surge
from fleetgate.domain.rotation.windows import DAY_NAMES, MaintenanceWindow

# --- rotation ---------------------------------------------------------------------------------

ROTATION_ZONES = (
    "UTC",
    "Asia/Tokyo",
    "America/New_York",
    "Europe/Berlin",
    "Australia/Sydney",
    "Asia/Kolkata",
    "Australia/Lord_Howe",
)
"""Zones with and without DST, both hemispheres, and a half-hour DST shift (Lord Howe)."""


def minutes(low: int = 0, high: int = 60 * 24 * 30) -> st.SearchStrategy[timedelta]:
    """Whole-minute durations in [low, high] minutes."""
    return st.integers(low, high).map(lambda m: timedelta(minutes=m))


def exact_durations(max_seconds: int = 10**8) -> st.SearchStrategy[timedelta]:
    """Durations with microsecond detail, positive or negative."""
    return st.integers(-max_seconds * 10**6, max_seconds * 10**6).map(
        lambda us: timedelta(microseconds=us)
    )


def clock_texts(*, allow_midnight_end: bool = False) -> st.SearchStrategy[str]:
    """ "HH:MM" between 00:00 and 23:59 (or "24:00" when allowed)."""
    top = 24 * 60 if allow_midnight_end else 24 * 60 - 1
    return st.integers(0, top).map(lambda m: f"{m // 60:02d}:{m % 60:02d}")


@st.composite
def maintenance_windows(draw: st.DrawFn) -> MaintenanceWindow:
    """A valid window entry: any zone, 1-7 days, any start/end that differ (may wrap)."""
    start = draw(clock_texts())
    end = draw(clock_texts(allow_midnight_end=True).filter(lambda e: e != start))
    days = draw(st.sets(st.sampled_from(DAY_NAMES), min_size=1))
    zone = draw(st.sampled_from(ROTATION_ZONES))
    return MaintenanceWindow(timezone=zone, days=tuple(sorted(days)), start=start, end=end)


def window_lists(max_size: int = 4) -> st.SearchStrategy[list[MaintenanceWindow]]:
    """One to ``max_size`` window entries."""
    return st.lists(maintenance_windows(), min_size=1, max_size=max_size)


def instants(
    low: datetime = datetime(2020, 1, 1, tzinfo=UTC),
    high: datetime = datetime(2030, 1, 1, tzinfo=UTC),
) -> st.SearchStrategy[datetime]:
    """Aware UTC instants at whole seconds."""
    span = int((high - low).total_seconds())
    return st.integers(0, span).map(lambda s: low + timedelta(seconds=s))


@st.composite
def rotation_policies(draw: st.DrawFn) -> RotationPolicy:
    """A valid RotationPolicy with random windows, K, override and surge timings."""
    optional = st.none() | minutes(1, 60 * 48)
    surge = Surge(
        ready_timeout=draw(minutes(1, 120)),
        cooldown_after=draw(minutes(0, 120)),
        failure_pause=draw(optional),
        retry_backoff=draw(minutes(1, 240)),
        drain_estimate=draw(optional),
        provisioning_estimate=draw(optional),
    )
    return RotationPolicy(
        name="generated",
        maintenance_windows=tuple(draw(window_lists())),
        min_rotation_chances=draw(st.integers(1, 5)),
        age_threshold=draw(st.none() | minutes(1, 60 * 24 * 30)),
        surge=surge,
    )


@st.composite
def derive_inputs(draw: st.DrawFn) -> DeriveInputs:
    """Derivation inputs over wide ranges, including degenerate P, D and K."""
    tgp_unset = draw(st.booleans())
    return DeriveInputs(
        expire_after=draw(minutes(1, 60 * 24 * 60)),
        tgp=timedelta(hours=1) if tgp_unset else draw(minutes(0, 60 * 48)),
        tgp_was_unset=tgp_unset,
        period=draw(st.sampled_from([timedelta(0), timedelta(minutes=1)]) | minutes(60, 60 * 168)),
        window_len=draw(minutes(0, 60 * 24 * 7)),
        idle_gap=draw(st.none() | minutes(1, 60 * 168)),
        ready_timeout=draw(minutes(1, 120)),
        cooldown=draw(minutes(0, 120)),
        retry_backoff=draw(minutes(1, 240)),
        k=draw(st.integers(-1, 6)),
        max_unavailable=draw(st.integers(0, 3)),
        node_count=draw(st.integers(0, 500)),
        override=draw(st.none() | minutes(-60, 60 * 24 * 60)),
        drain_estimate=draw(st.none() | minutes(1, 60 * 48)),
        provisioning_estimate=draw(st.none() | minutes(1, 120)),
    )


# --- capacity claims and the reconciler -------------------------------------------------------


def small_resources(high: int = 50) -> st.SearchStrategy[Resources]:
    """Resources with every dimension in [0, high]: small, so collisions with limits are common."""
    return st.builds(Resources, st.integers(0, high), st.integers(0, high), st.integers(0, high))


def _figures() -> st.SearchStrategy[float | int]:
    # Ints too: a detail's figures are typed float, but nothing stops an int reaching one.
    return st.one_of(st.integers(0, 10**6), st.floats(0, 1e9, allow_nan=False))


def dimension_details() -> st.SearchStrategy[DimensionDetail]:
    """One dimension of a refusal, sometimes with the demand clause's parts."""
    parts = st.dictionaries(st.sampled_from(["cpu_load_1", "expected_demand"]), _figures())
    return st.builds(
        DimensionDetail,
        st.sampled_from(["cpus", "memory_mb", "disk_gb", "demand"]),
        _figures(),
        _figures(),
        _figures(),
        st.booleans(),
        parts,
    )


def denials() -> st.SearchStrategy[Denial]:
    """A refusal at any stage, cordoned or not, with up to four dimensions."""
    return st.builds(
        Denial,
        st.sampled_from(list(Stage)),
        st.lists(dimension_details(), max_size=4).map(tuple),
        st.booleans(),
    )


@st.composite
def claim_accounts(draw: st.DrawFn) -> tuple[ClusterState, Resources, Resources]:
    """A consistent cluster row, a claim limit, and the namespace usage a create would migrate.

    The namespace's usage is part of the row's unclaimed usage, as it is whenever the counters
    match the placements.
    """
    migrated = draw(small_resources())
    others = draw(small_resources())
    claimed = draw(small_resources())
    slack = draw(small_resources(30))
    unclaimed = migrated.plus(others)
    total = claimed.plus(unclaimed).plus(slack)
    limit = draw(small_resources(80))
    row = ClusterState(total, claimed, unclaimed, datetime(2026, 1, 1, tzinfo=UTC))
    return row, limit, migrated


# --- capacity admission -----------------------------------------------------------------------

#: Target loads that matter: the default, the waiver (0), a disabled negative, and odd values.
TARGET_LOADS = st.sampled_from([0.75, 0.0, -1.0, 0.5, 1.0]) | st.floats(0.01, 2.0)
#: Real-valued figures as nodes publish them: whole, decimal, or awkward binary fractions.
LOADS = st.sampled_from([0.0, 0.1, 0.2, 0.3, 0.45, 3.0, 9.36]) | st.floats(
    0.0, 64.0, allow_nan=False, allow_infinity=False
)


@st.composite
def node_guard_rows(draw: st.DrawFn) -> dict[str, object]:
    """A node row as the node guard reads it: limits, used (often near or over), demand, metrics."""
    row: dict[str, object] = {"schedulable": draw(st.booleans() | st.just(True))}
    for d, high in (("cpus", 64), ("memory_mb", 4096), ("disk_gb", 500)):
        limit = draw(st.integers(0, high))
        row[f"limit_{d}"] = limit
        row[f"used_{d}"] = draw(st.integers(0, limit + 8) | st.just(limit))
    row["expected_demand"] = draw(LOADS)
    row["cpu_load_1"] = draw(st.none() | LOADS)
    row["cpu_schedulable"] = draw(st.none() | st.integers(0, 32))
    return row


@st.composite
def admit_params(draw: st.DrawFn) -> dict[str, float | int]:
    """A request as the guards read it: a size, a demand charge and a target load."""
    size = draw(small_resources(16))
    return {
        **size.as_dict(),
        "demand": size.cpus * draw(st.sampled_from([0.6, 2.5, 0.0]) | st.floats(0.0, 3.0)),
        "target_load": draw(TARGET_LOADS),
    }


@st.composite
def cluster_guard_rows(draw: st.DrawFn) -> dict[str, object]:
    """A cluster row as the cluster guard reads it (claimed may exceed total: it can, briefly)."""
    row: dict[str, object] = {}
    for d in ("cpus", "memory_mb", "disk_gb"):
        total = draw(st.integers(0, 100))
        row[f"total_{d}"] = total
        row[f"claimed_{d}"] = draw(st.integers(0, total + 5))
        row[f"unclaimed_used_{d}"] = draw(st.integers(0, total + 5))
    return row


#: Where a batch's requests go: two nodes, and one that does not exist.
BATCH_NODES = ("a", "b")


@st.composite
def admission_batches(draw: st.DrawFn) -> dict[str, object]:
    """A small ledger and a batch of enforced requests onto it: some fit, some are refused by
    the claim, the cluster or a node (allocation or demand clause), some repeat a request id,
    some name a missing node.

    ``nodes``: name -> (threads, memory_mb, disk_gb, cpu_load_1, cpu_schedulable); ``claim``:
    the limit of namespace ``claimed``'s claim, or None; ``enforcement``: ``advisory``/``hard``.
    """
    nodes = {
        name: (
            draw(st.integers(0, 12)),
            draw(st.integers(8, 64)),
            draw(st.integers(8, 64)),
            draw(st.none() | st.sampled_from([0.0, 0.5, 3.0])),
            draw(st.none() | st.integers(1, 8)),
        )
        for name in BATCH_NODES
    }
    size = st.builds(Resources, st.integers(0, 5), st.integers(0, 24), st.integers(0, 24))
    request = st.fixed_dictionaries(
        {
            "namespace": st.sampled_from(["team", "team", "claimed"]),
            "node": st.sampled_from([*BATCH_NODES, "gone"]),
            "resources": size,
            "demand_per_cpu": st.sampled_from([0.0, 0.6, 2.5]),
            "target_load": st.sampled_from([0.0, 0.75, 1.0]),
            "request_id": st.sampled_from([None, "r1", "r2"]),
        }
    )
    return {
        "nodes": nodes,
        "claim": draw(
            st.none()
            | st.builds(Resources, st.integers(0, 8), st.integers(0, 40), st.integers(0, 40))
        ),
        "enforcement": draw(st.sampled_from(["advisory", "hard"])),
        "requests": draw(st.lists(request, min_size=1, max_size=10)),
    }


# --- cluster / fleets (rotation controller and simulator) -------------------------------------

SIM_START = datetime(2024, 1, 1, tzinfo=UTC)
"""Where simulated fleets start (a Monday)."""

SIM_WINDOWS = (
    (MaintenanceWindow("Asia/Tokyo", ("Wed", "Sat"), "02:00", "06:00"),),
    (MaintenanceWindow("UTC", ("Mon", "Wed", "Fri"), "00:00", "03:00"),),
    (MaintenanceWindow("UTC", DAY_NAMES, "22:00", "23:30"),),
    (
        MaintenanceWindow("Europe/Berlin", ("Tue", "Thu"), "01:00", "05:00"),
        MaintenanceWindow("Europe/Berlin", ("Sun",), "10:00", "16:00"),
    ),
)
"""Window sets an operator would write: twice weekly, three times weekly, nightly, mixed."""


@st.composite
def sim_policies(draw: st.DrawFn) -> RotationPolicy:
    """Valid policies for simulation (K ≥ 2, whole-minute cooldown of at least a minute)."""
    return RotationPolicy(
        name="sim",
        maintenance_windows=draw(st.sampled_from(SIM_WINDOWS)),
        min_rotation_chances=draw(st.integers(2, 3)),
        surge=Surge(
            cooldown_after=draw(st.sampled_from([1, 5, 10])) * timedelta(minutes=1),
            ready_timeout=timedelta(minutes=15),
        ),
    )


@st.composite
def sim_fleets(draw: st.DrawFn) -> dict[str, object]:
    """A fleet document: template expireAfter/tGP and generated nodes aged over a spread."""
    return {
        "fleet": {
            "expireAfter": draw(st.sampled_from(["7d", "14d", "21d"])),
            "terminationGracePeriod": draw(st.sampled_from(["30m", "1h", "2h"])),
            "generate": {
                "count": draw(st.integers(1, 16)),
                "spread": f"{draw(st.integers(0, 7 * 24))}h",
            },
        }
    }


# --- demand decay -----------------------------------------------------------------------------


@st.composite
def demand_charges(draw: st.DrawFn) -> dict[str, object]:
    """A pass's ``now`` (epoch seconds), a decay window and charges on nodes a/b/c at ages
    around the window: fresh, exactly at its ends, past it, and stamped by a clock running ahead.
    """
    decay = draw(st.sampled_from([0.0, 0.5, 1.0, 600.0, 3600.0]) | st.floats(0.001, 1e6))
    now = draw(st.floats(1.5e9, 2.5e9))
    age = (
        st.sampled_from([0.0, decay, -1.0, decay * 2])
        | st.floats(-60.0, decay * 2 + 1.0)
        | st.integers(0, int(decay) + 1).map(float)
    )
    # A charge is cpus x demand_per_vcpu, so 0 or at least MIN_DEMAND_PER_VCPU: smaller ones
    # (subnormals) would make PostgreSQL raise a float underflow instead of computing a term.
    demand = st.sampled_from([0.0, 0.6, 2.4]) | st.floats(MIN_DEMAND_PER_VCPU, 1000.0)
    charges = draw(
        st.lists(st.tuples(st.sampled_from("abc"), demand, age), min_size=0, max_size=12)
    )
    return {
        "now": now,
        "decay": decay,
        # What the ledger stores: the admission instant as epoch seconds.
        "charges": [(node, d, now - a) for node, d, a in charges],
    }


FAULT_KINDS = (
    "fail-provisioning",
    "provisioning-heals",
    "capacity-shortage",
    "capacity-returns",
    "stick-drain",
    "preempt-placeholders",
    "not-ready",
    "ready-again",
    "opt-out",
    "opt-in",
    "karpenter-disrupts",
    "drifts",
    "drift-resolved",
    "pod-opt-out",
    "crash",
)
"""What ``sim_faults`` may do to a simulated cluster (the incremental-census property test)."""


@st.composite
def sim_varied_policies(draw: st.DrawFn) -> RotationPolicy:
    """``sim_policies`` plus the knobs that move a claim's census bucket by time: an explicit
    ageThreshold, retry backoff, failure pause, and the surge-less forceful fallback."""

    base = draw(sim_policies())
    age = draw(st.none() | st.sampled_from([timedelta(days=2), timedelta(days=5)]))
    surge = Surge(
        cooldown_after=base.surge.cooldown_after,
        ready_timeout=draw(st.sampled_from([5, 15])) * timedelta(minutes=1),
        retry_backoff=draw(st.sampled_from([10, 30, 120])) * timedelta(minutes=1),
        failure_pause=draw(st.none() | st.just(timedelta(minutes=20))),
        forceful_fallback=ForcefulFallback(enabled=draw(st.booleans())),
    )
    return RotationPolicy(
        name=base.name,
        age_threshold=age,
        maintenance_windows=base.maintenance_windows,
        min_rotation_chances=base.min_rotation_chances,
        surge=surge,
    )


@st.composite
def sim_faults(draw: st.DrawFn) -> list[tuple[timedelta, str, int]]:
    """Faults at instants of a simulation: (offset from the start, kind, which node)."""
    return draw(
        st.lists(
            st.tuples(
                st.integers(0, 20 * 24).map(lambda h: timedelta(hours=h, minutes=7)),
                st.sampled_from(FAULT_KINDS),
                st.integers(0, 15),
            ),
            max_size=8,
        ).map(sorted)
    )


# --- the fake cluster's indexes ------------------------------------------------------------

FAKE_CLUSTER_OPERATIONS = (
    "add-node",
    "add-pending-node",
    "add-pod",
    "add-bare-pod",
    "create-placeholder",
    "delete-pod",
    "delete-claim",
    "not-ready",
    "ready-again",
    "advance",
    "fail-provisioning",
    "capacity-shortage",
    "pool-not-ready",
    "preempt-placeholders",
    "karpenter-disrupts",
    "disrupt-later",
    "write-pod",
    "write-claim",
)
"""What ``fake_cluster_operations`` may do to a fake cluster: through its API, and by writing an
indexed attribute of a record directly (``write-pod``, ``write-claim``), which a hook must see."""


def fake_cluster_operations() -> st.SearchStrategy[list[tuple[str, int, int]]]:
    """Operations on a fake cluster of two pools: (kind, which target, which variant); the test
    maps each number onto what exists at that moment, so every sequence is applicable."""
    return st.lists(
        st.tuples(st.sampled_from(FAKE_CLUSTER_OPERATIONS), st.integers(0, 15), st.integers(0, 5)),
        min_size=4,
        max_size=60,
    )


# --- group commit -----------------------------------------------------------------------------

#: The namespaces of a batch: one under a (hard) claim, one charged to the unclaimed sums.
BATCH_NAMESPACES = ("claimed", "free")
BATCH_NODES = ("n1", "n2", "n3")


@st.composite
def queued_admissions(draw: st.DrawFn) -> list[tuple[str, str, Resources, str | None]]:
    """2 to 12 admissions ``(namespace, node, size, request id)`` queued for one batch.

    Sizes are small next to the test's nodes and claim, so refusals and fits mix; request ids
    come from a pool of two, so a batch often repeats one (an in-batch replay).
    """
    item = st.tuples(
        st.sampled_from(BATCH_NAMESPACES),
        st.sampled_from(BATCH_NODES),
        small_resources(4),
        st.none() | st.sampled_from(["r1", "r2"]),
    )
    return draw(st.lists(item, min_size=2, max_size=12))


# --- policy manifests at the edges of the one definition (fleetgate.domain.rotation.fields) ----

#: The units Go's time.ParseDuration reads, fleetgate's days, and a unit nobody reads.
_DURATION_UNITS = ("ns", "us", "µs", "μs", "ms", "s", "m", "h", "d", "x")
_DIGITS = "0123456789"


def _digit_strings(most: int) -> st.SearchStrategy[str]:
    """0 to ``most`` decimal digits (leading zeros included): numbers past every unit's cap."""
    return st.integers(0, most).flatmap(lambda n: st.text(_DIGITS, min_size=n, max_size=n))


@st.composite
def duration_texts(draw: st.DrawFn) -> str:
    """Duration texts inside and beyond the policy grammar: signs, Go's bare "0", ".5h" and
    "5.h", every unit (and one nobody reads), numbers of up to 20 digits, fractions past the
    microsecond, up to 17 numbers; now and then a text that is no duration at all."""
    if draw(st.integers(0, 12)) == 0:
        return draw(st.sampled_from(["0", "+0", "-0", "", "auto", " 15m", "15", ".h", "1h 2m"]))
    sign = draw(st.sampled_from(["", "", "", "+", "-"]))
    count = draw(st.integers(1, 3) | st.integers(1, 17))
    parts = []
    for _ in range(count):
        whole = draw(_digit_strings(20))
        fraction = draw(st.none() | _digit_strings(10))
        unit = draw(st.sampled_from(_DURATION_UNITS))
        parts.append(whole + ("" if fraction is None else "." + fraction) + unit)
    return sign + "".join(parts)


def _chances() -> st.SearchStrategy[Any]:
    """minRotationChances and maxUnavailable values: around their bounds, far past them, whole
    floats (an integer to JSON Schema and Kubernetes), a fraction and booleans."""
    return (
        st.integers(-3, 1003)
        | st.sampled_from([999_999_999, 2**31, 10**20])
        | st.integers(0, 3).map(float)
        | st.just(2.5)
        | st.booleans()
    )


@st.composite
def policy_manifests_near_bounds(draw: st.DrawFn) -> tuple[dict[str, Any], set[str]]:
    """A RotationPolicy manifest whose bounded fields (numbers, durations) are drawn inside and
    beyond the definition's bounds, and the paths of the fields drawn (the rest stays valid)."""
    spec: dict[str, Any] = {
        "nodePoolSelector": {"matchLabels": {"team": "web"}},
        "maintenanceWindows": [
            {"timezone": "Asia/Tokyo", "days": ["Wed", "Sat"], "start": "02:00", "end": "06:00"}
        ],
    }
    drawn: set[str] = set()
    if draw(st.booleans()):
        spec["minRotationChances"] = draw(_chances())
        drawn.add("spec.minRotationChances")
    if draw(st.booleans()):
        spec["ageThreshold"] = draw(st.just("auto") | duration_texts())
        drawn.add("spec.ageThreshold")
    surge: dict[str, Any] = {}
    if draw(st.booleans()):
        surge["maxUnavailable"] = draw(st.integers(-1, 3) | st.just(1.0))
    for name in ("readyTimeout", "cooldownAfter", "failurePause", "retryBackoff",
                 "drainEstimate", "provisioningEstimate"):  # fmt: skip
        if draw(st.integers(0, 2)) == 0:
            surge[name] = draw(duration_texts())
    if surge:
        spec["surge"] = surge
        drawn |= {f"spec.surge.{name}" for name in surge}
    manifest = {
        "apiVersion": "fleetgate.io/v1alpha1",
        "kind": "RotationPolicy",
        "metadata": {"name": "edges"},
        "spec": spec,
    }
    return manifest, drawn


# --- the API's published patterns -----------------------------------------------------------------


def matching(pattern: str) -> st.SearchStrategy[str]:
    """Whole strings a published schema ``pattern`` admits (what a schema-driven client sends)."""
    return st.from_regex(pattern, fullmatch=True)


#: The JSON Schema keywords :func:`from_json_schema` reads, and those it may pass over (they say
#: nothing about which values are valid).
_SCHEMA_KEYWORDS = {
    "$defs", "$ref", "additionalProperties", "anyOf", "const", "enum", "items", "maxItems",
    "maxLength", "maxProperties", "maximum", "minItems", "minLength", "minimum", "oneOf",
    "pattern", "properties", "propertyNames", "required", "type",
}  # fmt: skip
_SCHEMA_ANNOTATIONS = {"default", "description", "title", "contentMediaType", "examples"}


def from_json_schema(schema: dict[str, Any], *, max_items: int = 4) -> st.SearchStrategy[Any]:
    """Values a published JSON Schema admits, drawn from the document alone (as a schema-driven
    client would make them): no model behind it is consulted.

    Reads the keywords pydantic writes for the API's request models; any other keyword fails
    loudly, so a constraint the strategy does not know can never be silently left out. Lists and
    maps are kept to ``max_items`` entries (the bounds themselves are tested where they matter).
    """
    definitions = schema.get("$defs", {})

    def build(node: dict[str, Any]) -> st.SearchStrategy[Any]:
        unknown = set(node) - _SCHEMA_KEYWORDS - _SCHEMA_ANNOTATIONS
        if unknown:
            raise ValueError(f"from_json_schema: keywords it does not read: {sorted(unknown)}")
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            return st.deferred(lambda: build(definitions[name]))
        if "anyOf" in node or "oneOf" in node:
            return st.one_of([build(n) for n in node.get("anyOf") or node["oneOf"]])
        if "const" in node:
            return st.just(node["const"])
        if "enum" in node:
            return st.sampled_from(node["enum"])
        kind = node.get("type")
        if kind == "null":
            return st.none()
        if kind == "boolean":
            return st.booleans()
        if kind == "integer":
            return st.integers(node.get("minimum"), node.get("maximum"))
        if kind == "string":
            return _strings(node)
        if kind == "array":
            return st.lists(
                build(node["items"]),
                min_size=node.get("minItems", 0),
                max_size=min(node.get("maxItems", max_items), max_items),
            )
        if kind == "object":
            return _objects(node, build, max_items)
        raise ValueError(f"from_json_schema: a schema without a type it reads: {node}")

    return build(schema)


def _strings(node: dict[str, Any]) -> st.SearchStrategy[str]:
    low, high = node.get("minLength", 0), node.get("maxLength")
    if "pattern" not in node:
        return st.text(min_size=low, max_size=min(high if high is not None else 40, 40))
    return matching(node["pattern"]).filter(lambda s: low <= len(s) <= (high or len(s)))


def _objects(
    node: dict[str, Any],
    build: Any,
    max_items: int,
) -> st.SearchStrategy[dict[str, Any]]:
    properties = node.get("properties", {})
    required = set(node.get("required", ()))
    extra = node.get("additionalProperties", True)
    if properties:
        if extra is not False:
            raise ValueError("from_json_schema: properties with additionalProperties allowed")
        return st.fixed_dictionaries(
            {name: build(s) for name, s in properties.items() if name in required},
            optional={name: build(s) for name, s in properties.items() if name not in required},
        )
    if not isinstance(extra, dict):
        raise ValueError("from_json_schema: an object needs properties or additionalProperties")
    keys = {"type": "string", **node.get("propertyNames", {})}
    return st.dictionaries(
        build(keys),
        build(extra),
        max_size=min(node.get("maxProperties", max_items), max_items),
    )


#: Pieces a log line is drawn from: credential words and shapes in odd cases, the characters
#: around them, and non-ASCII letters that ignore-case matching folds onto ASCII ones.
LOG_PIECES = (
    "Bearer ",
    "BASIC ",
    "authorization: ",
    "Set-Cookie=",
    "x-api_key=",
    "APIKEY:",
    "admin_TOKEN='",
    "Password=",
    "passwd: ",
    "client_secret=",
    "postgresql://u:",
    "@db/x",
    "://",
    "\u212a",  # the Kelvin sign: matches k ignoring case
    "\u017f",  # the long s: matches s ignoring case
    "tO\u212aen=",
    "pa\u017f\u017fword=",
    '"',
    "'",
    " ",
    "=",
    ":",
)


def log_lines() -> st.SearchStrategy[str]:
    """Text as a log line may hold it: ordinary words, credential shapes, and odd letters."""
    piece = st.one_of(st.sampled_from(LOG_PIECES), st.text(max_size=8))
    return st.lists(piece, max_size=12).map("".join)
