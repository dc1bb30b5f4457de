"""The two files that describe a capacity ledger by hand, read strictly by one definition.

``fleetgate check --ledger-snapshot FILE`` reads a *snapshot* (limits as the ledger holds them,
after overcommit)::

    nodes:
      - {name: n-1, pool: general, cpus: 24, memoryMb: 32768, diskGb: 100}
      - {name: n-2, pool: general, cpus: 12, memoryMb: 16384, diskGb: 100, schedulable: false}
    placements:            # count: that many alike (default 1); namespace: default "default"
      - {node: n-1, namespace: team, cpus: 4, memoryMb: 1024, diskGb: 5, count: 5}
    claims:                # active claims (optional)
      - {namespace: team, cpus: 40, memoryMb: 40960, diskGb: 200}

and ``fleetgate simulate`` a fleet file's ``fleet.ledger`` (docs/rotation-simulator.md), whose
placements and claims are the same items under the same rules. Every rule lives here, so the same
item gets the same answer from every entry point:

- an unknown key is refused (a misspelt ``cpu:`` is not 0 vCPU), and so is a missing size field
  (``cpus``, ``memoryMb``, ``diskGb``: a missing one is not 0);
- sizes are whole numbers from 0 to the domain's bounds (``MAX_CPUS``, ``MAX_AMOUNT``), never a
  boolean or a string;
- a node's placements must fit its limits, as the ledger's guard would hold them: the first item
  that takes a node over a limit is named with the total and the limit.

The text is read by :func:`fleetgate.apps.yamlfile.read_yaml` (a syntax error is one line with
its line and column). Each error is one line, ``<path in the file>: <reason>``; the caller
prefixes the option or the file.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fleetgate.domain.capacity.claims import enforcement_of
from fleetgate.domain.capacity.dimensions import (
    ALLOCATION,
    MAX_AMOUNT,
    MAX_CPUS,
    MAX_THREADS,
    Capacity,
    Overcommit,
    Resources,
    node_limits,
)
from fleetgate.domain.capacity.model import (
    ClusterState,
    NodeMetrics,
    NodeState,
    Placement,
    check_namespace,
    check_node_name,
)
from fleetgate.domain.nodesync import capacity_of

__all__ = [
    "DEFAULT_THREADS",
    "EPOCH",
    "Batch",
    "FleetLedger",
    "LedgerFileError",
    "allocatable",
    "fleet_ledger_of",
    "fleet_node_limits",
    "snapshot_of",
]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
DEFAULT_THREADS = 4
"""The threads of a fleet node the ledger section does not size (``fleet.ledger.nodeCpu``)."""
GIB_MILLI = 2**30 * 1_000

#: The size keys of a node, placement or claim: (file key, dimension, bound, unit in messages).
SIZE_KEYS = (
    ("cpus", "cpus", MAX_CPUS, "vCPU"),
    ("memoryMb", "memory_mb", MAX_AMOUNT, "MB"),
    ("diskGb", "disk_gb", MAX_AMOUNT, "GB"),
)
_SIZE = tuple(k for k, *_ in SIZE_KEYS)


class LedgerFileError(ValueError):
    """A ledger file (snapshot or ``fleet.ledger``) is invalid: one line naming the field."""


# --- the items both files share ----------------------------------------------------------------


def mapping(
    value: Any, path: str, required: Sequence[str] = (), optional: Collection[str] = ()
) -> Mapping[str, Any]:
    """``value`` as a mapping with every ``required`` key and no key outside the two lists."""
    allowed = [*required, *optional]
    if not isinstance(value, Mapping):
        raise LedgerFileError(f"{path}: must be a mapping with {', '.join(allowed)}")
    for key in value:
        if key not in allowed:
            raise LedgerFileError(
                f"{_join(path, key)}: unknown key (expected {', '.join(allowed)})"
            )
    for key in required:
        if key not in value:
            raise LedgerFileError(f"{_join(path, key)}: required")
    return value


def items(value: Any, path: str) -> list[Any]:
    """``value`` as a list (absent or null: empty)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise LedgerFileError(f"{path}: must be a list")
    return value


def whole(value: Any, path: str, low: int = 0, high: int = MAX_AMOUNT) -> int:
    """A whole number from ``low`` to ``high`` (never a boolean, a string or 4.5)."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise LedgerFileError(f"{path}: must be a whole number from {low} to {high}, got {value!r}")
    return value


def size(item: Mapping[str, Any], path: str) -> Resources:
    """The ``cpus``, ``memoryMb`` and ``diskGb`` of a node, placement or claim (all required)."""
    values = {}
    for key, dimension, high, _ in SIZE_KEYS:
        if key not in item:
            raise LedgerFileError(f"{path}.{key}: required")
        values[dimension] = whole(item[key], f"{path}.{key}", 0, high)
    return Resources(**values)


def namespace(item: Mapping[str, Any], path: str, default: str | None = "default") -> str:
    """The item's namespace (a DNS label); ``default`` when absent (None: required)."""
    if default is None and "namespace" not in item:
        raise LedgerFileError(f"{path}.namespace: required")
    try:
        return check_namespace(item.get("namespace", default), f"{path}.namespace")
    except ValueError as exc:
        raise LedgerFileError(str(exc)) from None


@dataclass(frozen=True)
class Batch:
    """``count`` alike placements of ``size`` for ``namespace``; ``path`` is where it was read."""

    namespace: str
    size: Resources
    count: int
    path: str = ""

    def total(self) -> Resources:
        """What the batch uses in all."""
        return Resources(*(self.count * self.size.get(d) for d in ALLOCATION))


def batch(item: Any, path: str, node_key: bool = False) -> Batch:
    """One placements item: namespace (default "default"), the size, count (default 1)."""
    item = mapping(item, path, [*(["node"] if node_key else []), *_SIZE], ("namespace", "count"))
    count = whole(item.get("count", 1), f"{path}.count", 1, 1_000_000)
    return Batch(namespace(item, path), size(item, path), count, path)


def claim(item: Any, path: str) -> tuple[str, Resources]:
    """One claims item: its namespace (required) and its limits."""
    item = mapping(item, path, ["namespace", *_SIZE])
    return namespace(item, path, None), size(item, path)


def fits(node: str, limits: Resources, batches: Sequence[Batch]) -> Resources:
    """What ``batches`` use on ``node``; the first batch that takes it over a limit is refused."""
    used = Resources()
    for b in batches:
        used = used.plus(b.total())
        for key, dimension, _, unit in SIZE_KEYS:
            if used.get(dimension) > limits.get(dimension):
                raise LedgerFileError(
                    f"{b.path}.{key}: puts node {node} at {used.get(dimension)} {unit}, above "
                    f"its limit of {limits.get(dimension)} {unit}"
                )
    return used


def _join(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


# --- the snapshot ------------------------------------------------------------------------------

_NODE_OPTIONAL = ("pool", "schedulable")


def snapshot_of(doc: object) -> tuple[list[NodeState], dict[str, list[Placement]], ClusterState]:
    """The nodes, the placements by node and the cluster row a snapshot document describes.

    Each node's usage is the sum of its placements; the cluster row is derived as the ledger
    keeps it (the total from the limits, the claimed from the claims, the unclaimed usage from
    the namespaces without one).
    """
    doc = mapping(doc, "", ["nodes"], ("placements", "claims"))
    declared: dict[str, tuple[str, Resources, bool]] = {}
    for i, raw in enumerate(items(doc["nodes"], "nodes")):
        where = f"nodes[{i}]"
        item = mapping(raw, where, ["name", *_SIZE], _NODE_OPTIONAL)
        try:
            name = check_node_name(item["name"], f"{where}.name")
        except ValueError as exc:
            raise LedgerFileError(str(exc)) from None
        if name in declared:
            raise LedgerFileError(f"{where}.name: {name!r} appears twice")
        pool, schedulable = item.get("pool", ""), item.get("schedulable", True)
        if not isinstance(pool, str) or len(pool) > 253:
            raise LedgerFileError(f"{where}.pool: must be a string of at most 253 characters")
        if not isinstance(schedulable, bool):
            raise LedgerFileError(f"{where}.schedulable: must be true or false")
        declared[name] = (pool, size(item, where), schedulable)
    batches: dict[str, list[Batch]] = {}
    for i, raw in enumerate(items(doc.get("placements"), "placements")):
        where = f"placements[{i}]"
        b = batch(raw, where, node_key=True)
        node = raw["node"]
        if not isinstance(node, str) or node not in declared:
            raise LedgerFileError(f"{where}.node: {node!r} is not one of the nodes")
        batches.setdefault(node, []).append(b)
    claims = [
        claim(raw, f"claims[{i}]") for i, raw in enumerate(items(doc.get("claims"), "claims"))
    ]
    return _snapshot(declared, batches, claims)


def _snapshot(
    declared: Mapping[str, tuple[str, Resources, bool]],
    batches: Mapping[str, list[Batch]],
    claims: Sequence[tuple[str, Resources]],
) -> tuple[list[NodeState], dict[str, list[Placement]], ClusterState]:
    claimants = {ns for ns, _ in claims}
    claimed = Resources()
    for _, limit in claims:
        claimed = claimed.plus(limit)
    nodes: list[NodeState] = []
    held: dict[str, list[Placement]] = {}
    total, unclaimed = Resources(), Resources()
    for name, (pool, limit, schedulable) in declared.items():
        used = fits(name, limit, batches.get(name, []))
        on = held.setdefault(name, [])
        for b in batches.get(name, []):
            # Each id names the item it came from (``placements[2]#0``); file order is kept.
            for k in range(b.count):
                on.append(Placement(f"{b.path}#{k}", b.namespace, name, b.size, 0.0, EPOCH))
            if b.namespace not in claimants:
                unclaimed = unclaimed.plus(b.total())
        capacity = Capacity(limit.cpus, limit.memory_mb, limit.disk_gb)
        nodes.append(
            NodeState(name, pool, {}, capacity, limit, used, 0.0, NodeMetrics(), schedulable, EPOCH)
        )
        total = total.plus(limit)
    return nodes, held, ClusterState(total, claimed, unclaimed, EPOCH)


# --- a fleet file's ledger section -------------------------------------------------------------


@dataclass(frozen=True)
class FleetLedger:
    """What ``fleet.ledger`` declares."""

    node_threads: int = DEFAULT_THREADS
    enforcement: str = "advisory"
    threads: Mapping[str, int] = field(default_factory=dict)
    placements: Mapping[str, tuple[Batch, ...]] = field(default_factory=dict)
    claims: tuple[tuple[str, Resources], ...] = ()
    add_nodes: tuple[tuple[datetime, int], ...] = ()
    workload_cpu: Mapping[str, int] = field(default_factory=dict)
    """Per listed node, the whole CPUs its workload Pod asks for (absent: the default share)."""
    gate: bool = True
    """The controller's ledger gate (``controller.ledger_gate_enabled``); off, drains go blind."""


def allocatable(threads: int) -> dict[str, int]:
    """A simulated node of ``threads`` CPUs as the cluster reports it (milli-units): 4 GiB a
    thread."""
    return {"cpu": 1000 * threads, "memory": 4 * threads * GIB_MILLI, "pods": 110_000}


def fleet_node_limits(threads: int) -> Resources:
    """The ledger limits of a simulated node of ``threads`` CPUs: its allocatable as the node
    sync reads it, times the ledger's default overcommit (what the simulation's ledger uses)."""
    return node_limits(capacity_of(allocatable(threads)), Overcommit())


_FLEET_KEYS = ("nodeCpu", "enforcement", "gate", "nodes", "claims", "addNodes")
PATH = "fleet.ledger"


def fleet_ledger_of(
    spec: Any, node_names: Sequence[str], parse_instant: Callable[[Any, str], datetime]
) -> FleetLedger | None:
    """Read ``fleet.ledger`` (None when absent) against the fleet's listed node names."""
    if spec is None:
        return None
    spec = mapping(spec, PATH, (), _FLEET_KEYS)
    try:
        enforcement = enforcement_of(spec.get("enforcement", "advisory")).value
    except ValueError as exc:
        raise LedgerFileError(f"{PATH}.enforcement: {exc}") from None
    node_threads = whole(spec.get("nodeCpu", DEFAULT_THREADS), f"{PATH}.nodeCpu", 1, MAX_THREADS)
    gate = spec.get("gate", True)
    if not isinstance(gate, bool):
        raise LedgerFileError(f"{PATH}.gate: must be true or false")
    threads: dict[str, int] = {}
    workload_cpu: dict[str, int] = {}
    placements: dict[str, tuple[Batch, ...]] = {}
    nodes = spec.get("nodes") or {}
    if not isinstance(nodes, Mapping):
        raise LedgerFileError(f"{PATH}.nodes: must map listed node names to their placements")
    for name, raw in nodes.items():
        path = f"{PATH}.nodes.{name}"
        if name not in node_names:
            raise LedgerFileError(f"{path}: not a listed node (fleet.nodes)")
        item = mapping(raw or {}, path, (), ("cpu", "workloadCpu", "placements"))
        if "cpu" in item:
            threads[name] = whole(item["cpu"], f"{path}.cpu", 1, MAX_THREADS)
        if "workloadCpu" in item:
            cpu = threads.get(name, node_threads)
            workload_cpu[name] = whole(item["workloadCpu"], f"{path}.workloadCpu", 0, cpu)
        where = f"{path}.placements"
        batches = tuple(
            batch(p, f"{where}[{i}]") for i, p in enumerate(items(item.get("placements"), where))
        )
        fits(name, fleet_node_limits(threads.get(name, node_threads)), batches)
        placements[name] = batches
    claims = tuple(
        claim(c, f"{PATH}.claims[{i}]")
        for i, c in enumerate(items(spec.get("claims"), f"{PATH}.claims"))
    )
    added = []
    for i, raw in enumerate(items(spec.get("addNodes"), f"{PATH}.addNodes")):
        where = f"{PATH}.addNodes[{i}]"
        item = mapping(raw, where, ["at"], ("cpu",))
        cpu = whole(item.get("cpu", DEFAULT_THREADS), f"{where}.cpu", 1, MAX_THREADS)
        added.append((parse_instant(item["at"], f"{where}.at"), cpu))
    return FleetLedger(
        node_threads=node_threads,
        enforcement=enforcement,
        threads=threads,
        placements=placements,
        claims=claims,
        add_nodes=tuple(sorted(added)),
        workload_cpu=workload_cpu,
        gate=gate,
    )
