"""schemathesis over the OpenAPI document: no input gives a 5xx, and every response conforms.

Runs on the database under test (FLEETGATE_TEST_DATABASE_URL: a database of its own on that
server, dropped at exit; else its own SQLite file), so ``-m backend`` fuzzes each server too.
Examples per operation are kept modest so the suite stays fast. schemathesis starts the app's
lifespan in its own event-loop thread and stops it after each test.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import secrets
import tempfile
import zlib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import schemathesis
import yaml
from hypothesis import HealthCheck, settings
from pydantic import TypeAdapter
from schemathesis import GenerationMode
from schemathesis.checks import (
    CHECKS,
    negative_data_rejection,
    not_a_server_error,
    positive_data_acceptance,
    response_schema_conformance,
)
from schemathesis.config import SchemathesisConfig
from schemathesis.hooks import HookContext
from sqlalchemy import delete, update
from sqlalchemy.ext.asyncio import create_async_engine

from fleetgate.adapters.sql.schema import api_tokens, claims, cluster, events, nodes, placements
from fleetgate.apps.api.app import create_app
from fleetgate.apps.api.schemas import MAX_AMOUNT, MAX_CLAIM_SECONDS, MAX_THREADS
from fleetgate.apps.api.schemas.fleet import FIRST_YEAR, LAST_YEAR, Labels
from fleetgate.apps.api.schemas.policy import Instant, RotationPolicyManifest
from fleetgate.apps.api.schemas.rotation import MAX_SIMULATE_DAYS, MAX_SIMULATE_POLICY_DAYS
from fleetgate.apps.container import build_container
from fleetgate.apps.policyfile import policies_from_text
from fleetgate.apps.settings import ApiSettings, CapacitySettings, Settings
from fleetgate.apps.simulate.fleet import parse_instant
from fleetgate.domain.durations import parse_duration
from fleetgate.domain.rotation.budgets import BudgetError, read_schedule
from fleetgate.domain.rotation.labelselector import LabelSelector
from fleetgate.domain.rotation.manifest import policy_from_manifest
from tests.apps.api.conftest import ADMIN_TOKEN
from tests.apps.api.schemas.test_common import accepts
from tests.backends import create_database, drop_database

pytestmark = pytest.mark.backend

EXAMPLES = 25
#: Operations whose body may carry ``expires_at``: its rule ("after the server's clock, within
#: MAX_CLAIM_SECONDS") is stated in the schema's description, as JSON Schema cannot say "after
#: now"; positive cases draw it from that range (``_future_expiry``), so every check,
#: positive_data_acceptance included, runs on every operation.
CLAIM_EXPIRY = {"POST /v1/namespaces/{ns}/claims", "PATCH /v1/namespaces/{ns}/claims/{claim_id}"}
EXPIRY_MARGIN = 60
#: Operations whose body carries a RotationPolicy (``policy``): an object whose schema is the
#: CRD's, or its YAML text. Two cross-field rules are stated in descriptions only (a window's end
#: differs from its start, an exclusion ends after it starts), and the text form's content is
#: declared by contentMediaType, which no generator fills in: positive cases are brought within
#: those rules by ``_policy_rules``; everything else of the manifest is the schema's to generate.
POLICY_BODY = {"POST /v1/rotation/check", "POST /v1/rotation/simulate"}
#: The YAML a positive text-form case sends: a documented example policy.
POLICY_TEXT = (Path(__file__).resolve().parents[3] / "examples" / "tokyo-policy.yaml").read_text()
#: An exclusion's instants, read as the server reads them.
INSTANT = TypeAdapter(Instant)
#: A fleet's labels, as the fleet file's schema admits them.
LABELS: TypeAdapter[Any] = TypeAdapter(Labels)
#: The simulation: its policy as above; its fleet a fleet file whose schema states, in
#: descriptions, what relates it to the policy and the start (the selector selects its labels,
#: node names are unique, createdAt not after start, disruptedAt not before it, a disruption
#: budget's schedule is cron the reader takes and comes with a duration), and whose text
#: form is YAML; and a span and policy bounds a run can take. Positive cases are brought within
#: those rules by ``_simulation_rules``, and kept small: at most a day of virtual time and
#: SIMULATED_NODES nodes, so a case costs milliseconds (the coverage phase alone sends hundreds);
#: long and big runs are the route tests' and the benchmark's. A run longer than the fuzz app's
#: wall-clock bound is the documented 503 ``simulation_too_long``, and the bound is short, so no
#: case holds the fuzzer up.
SIMULATE = "POST /v1/rotation/simulate"
EXAMPLES_DIR = Path(__file__).resolve().parents[3] / "examples"
#: The documented example policy and fleet of the simulator, which go together.
SIMULATE_POLICY_TEXT = (EXAMPLES_DIR / "policy-simulate.yaml").read_text()
FLEET_TEXT = (EXAMPLES_DIR / "fleet-generated.yaml").read_text()
SIMULATE_SECONDS = 0.5
SIMULATED_SPAN = timedelta(days=1)
SIMULATED_NODES = 100
assert timedelta(0) < SIMULATED_SPAN <= timedelta(days=MAX_SIMULATE_DAYS)


def _database_url() -> str:
    """The fuzzer's own database on the server under test (dropped at exit), or a SQLite file."""
    server_url = os.environ.get("FLEETGATE_TEST_DATABASE_URL", "")
    if not server_url or server_url.startswith("sqlite"):
        workdir = tempfile.TemporaryDirectory(prefix="fleetgate-fuzz-")
        atexit.register(workdir.cleanup)
        return f"sqlite+aiosqlite:///{Path(workdir.name) / 'fuzz.db'}"
    name = f"fgt_fuzz_{os.getpid()}_{secrets.token_hex(3)}"
    url = create_database(server_url, name)
    atexit.register(drop_database, server_url, name)
    return url


# Module level because schemathesis parametrizes at collection time.
_DATABASE_URL = _database_url()
_SETTINGS = Settings(
    database_url=_DATABASE_URL,
    api=ApiSettings(admin_token=ADMIN_TOKEN),
    capacity=CapacitySettings(ranking_seed=3),
)


#: The only 5xx answers intended: a capacity refusal, and a simulation past its wall-clock bound.
INTENDED_5XX = {507: "insufficient_capacity", 503: "simulation_too_long"}


@schemathesis.check
def only_intended_5xx(ctx: Any, response: Any, case: schemathesis.Case) -> None:
    """No 5xx but the documented 507 ``insufficient_capacity`` and, for a simulation, the 503
    ``simulation_too_long``."""
    if response.status_code >= 500:
        code = INTENDED_5XX.get(response.status_code)
        body = response.json() if code is not None else None
        intended = isinstance(body, dict) and body.get("error") == code
        if code == "simulation_too_long":
            intended = intended and case.operation.label == SIMULATE
        if not intended:
            raise AssertionError(f"server error {response.status_code}: {response.text[:300]}")


async def _empty(url: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as db:
            for table in (placements, claims, events, api_tokens, nodes):  # children first
                await db.execute(delete(table))
            counters = [c.name for c in cluster.columns if c.name not in ("id", "updated_at")]
            await db.execute(update(cluster).values(dict.fromkeys(counters, 0)))
    finally:
        await engine.dispose()


def _empty_database() -> None:
    """Delete every row (children first) and zero the cluster row, straight on the database."""
    asyncio.run(_empty(_DATABASE_URL))


app = create_app(build_container(_SETTINGS))
app.state.simulate_seconds = SIMULATE_SECONDS
# The admin token as the bearer scheme's credential: schemathesis then sends it on every valid
# request, and knows a case it made with a broken Authorization header must be refused.
# Both generation modes, stated rather than left to the default: positive cases (schema-valid,
# which positive_data_acceptance says must be accepted) and negative ones (schema-violating,
# which negative_data_rejection says must be refused: a boolean where a number is expected).
_CONFIG = SchemathesisConfig.from_dict(
    {
        "generation": {"mode": "all"},
        "auth": {"openapi": {"HTTPBearer": {"bearer": ADMIN_TOKEN}}},
    }
)
schema = schemathesis.openapi.from_asgi("/openapi.json", app, config=_CONFIG)


def _positive_body(
    context: HookContext, case: schemathesis.Case, operations: set[str]
) -> dict[str, Any] | None:
    """The JSON body of a positive (schema-valid) case of one of ``operations``, else None.

    The hooks below touch only these, and only to put in schema-valid values, so a positive case
    stays positive and a negative one keeps the violation it was made with.
    """
    body, meta = case.body, case.meta
    if (
        context.operation is not None
        and context.operation.label in operations
        and isinstance(body, dict)
        and meta is not None
        and meta.generation.mode.is_positive
    ):
        return body
    return None


@schema.hook("map_case")
def _future_expiry(context: HookContext, case: schemathesis.Case) -> schemathesis.Case:
    """A positive claim case's ``expires_at`` moved into the range its description states.

    The instant drawn picks where in the range it lands (a hash, so a replayed case maps the same
    way), from a minute to MAX_CLAIM_SECONDS less a minute ahead: the margins absorb the delay
    between drawing and sending.
    """
    body = _positive_body(context, case, CLAIM_EXPIRY)
    if body is not None and isinstance(body.get("expires_at"), str):
        ahead = EXPIRY_MARGIN + zlib.crc32(body["expires_at"].encode()) % (
            MAX_CLAIM_SECONDS - 2 * EXPIRY_MARGIN
        )
        at = datetime.now(UTC) + timedelta(seconds=ahead)
        case.body = {**body, "expires_at": at.isoformat()}
    return case


def _within_cross_field_rules(policy: dict[str, Any]) -> dict[str, Any]:
    """``policy`` with each window's end moved off its start and each exclusion ordered."""
    spec = dict(policy["spec"])
    spec["maintenanceWindows"] = [
        {**window, "end": "24:00"} if window["end"] == window["start"] else window
        for window in spec["maintenanceWindows"]
    ]
    exclusions = []
    for exclusion in spec.get("exclusions") or ():
        start = INSTANT.validate_python(exclusion["start"])  # read as the server reads it
        end = INSTANT.validate_python(exclusion["end"])
        if end <= start:
            end = start + timedelta(seconds=1)
        exclusions.append({"start": start.isoformat(), "end": end.isoformat()})
    if exclusions:
        spec["exclusions"] = exclusions
    return {**policy, "spec": spec}


@schema.hook("map_case")
def _policy_rules(context: HookContext, case: schemathesis.Case) -> schemathesis.Case:
    """A positive policy case brought within the rules JSON Schema cannot state (see above)."""
    body = _positive_body(context, case, POLICY_BODY)
    if body is not None:
        policy = body.get("policy")
        if isinstance(policy, str):
            case.body = {**body, "policy": POLICY_TEXT}
        elif isinstance(policy, dict):
            case.body = {**body, "policy": _within_cross_field_rules(policy)}
    return case


def _labels_selected_by(selector: dict[str, Any], labels: dict[str, str]) -> dict[str, str]:
    """``labels`` changed as little as makes ``selector`` select them (may still not, when its
    requirements contradict each other)."""
    out = {**labels, **(selector.get("matchLabels") or {})}
    for requirement in selector.get("matchExpressions") or ():
        key, operator = requirement["key"], requirement["operator"]
        values = requirement.get("values") or []
        if operator == "In" and out.get(key) not in values:
            out[key] = values[0]
        elif operator == "NotIn" and out.get(key) in values:
            del out[key]
        elif operator == "Exists":
            out.setdefault(key, "")
        elif operator == "DoesNotExist":
            out.pop(key, None)
    return out


def _selector(policy: dict[str, Any] | str) -> LabelSelector:
    """The policy's nodePoolSelector, read as the server reads it."""
    if isinstance(policy, str):
        (read,) = policies_from_text(policy)
    else:
        read = policy_from_manifest(RotationPolicyManifest.model_validate(policy).document())
    assert read.node_pool_selector is not None
    return read.node_pool_selector


def _simulated_policy(policy: dict[str, Any]) -> dict[str, Any]:
    """``policy`` with its durations and exclusions within what a simulation takes."""
    spec = dict(policy["spec"])
    limit = timedelta(days=MAX_SIMULATE_POLICY_DAYS)
    if (
        spec.get("ageThreshold") not in (None, "auto")
        and parse_duration(spec["ageThreshold"]) > limit
    ):
        spec["ageThreshold"] = f"{MAX_SIMULATE_POLICY_DAYS}d"
    if spec.get("surge"):
        spec["surge"] = {
            key: f"{MAX_SIMULATE_POLICY_DAYS}d"
            if isinstance(value, str) and parse_duration(value) > limit
            else value
            for key, value in spec["surge"].items()
        }
    exclusions = []
    for exclusion in spec.get("exclusions") or ():
        try:
            start = INSTANT.validate_python(exclusion["start"]).astimezone(UTC)
            end = INSTANT.validate_python(exclusion["end"]).astimezone(UTC)
            inside = start.year >= FIRST_YEAR and end.year <= LAST_YEAR
        except OverflowError:  # an offset that takes year 1 or 9999 off the calendar
            inside = False
        if inside:
            exclusions.append(exclusion)
        else:
            exclusions.append({"start": "2030-01-01T00:00:00Z", "end": "2030-01-02T00:00:00Z"})
    if exclusions:
        spec["exclusions"] = exclusions
    return {**policy, "spec": spec}


def _simulated_fleet(fleet: dict[str, Any], start: str) -> dict[str, Any]:
    """A fleet object of at most SIMULATED_NODES nodes with unique names, born by ``start`` and
    disrupted from it on (``start`` as sent: any instant the schema admits)."""
    spec = dict(fleet["fleet"])
    begins = parse_instant(start, "start")
    generate = spec.get("generate")
    if generate is not None and generate["count"] > SIMULATED_NODES:
        spec["generate"] = {**generate, "count": 1 + generate["count"] % SIMULATED_NODES}
    if "nodes" in spec:
        nodes, seen = [], set()
        for index, node in enumerate(spec["nodes"][:SIMULATED_NODES]):
            node = dict(node)
            if node["name"] in seen:
                node["name"] = f"{node['name'][:240]}-{index}"
            seen.add(node["name"])
            if parse_instant(node["createdAt"], "createdAt") > begins:
                node["createdAt"] = start
            disrupted = node.get("disruptedAt")
            if disrupted is not None and parse_instant(disrupted, "disruptedAt") < begins:
                node["disruptedAt"] = start
            nodes.append(node)
        spec["nodes"] = nodes
    if spec.get("budgets"):
        spec["budgets"] = [_readable_budget(b) for b in spec["budgets"]]
    return {**fleet, "fleet": spec}


def _readable_budget(budget: dict[str, Any]) -> dict[str, Any]:
    """A disruption budget within the rules its descriptions state: a schedule the cron reader
    takes, and set together with a duration."""
    schedule, duration = budget.get("schedule"), budget.get("duration")
    if schedule is None and duration is None:
        return budget
    try:
        read_schedule(schedule or "")
    except BudgetError:
        schedule = "@daily"
    return {**budget, "schedule": schedule, "duration": duration or "1h"}


@schema.hook("map_case")
def _simulation_rules(context: HookContext, case: schemathesis.Case) -> schemathesis.Case:
    """A positive simulation brought within the rules its descriptions state (see SIMULATE).

    Runs after ``_policy_rules``; a text policy or fleet becomes the documented example.
    """
    body = _positive_body(context, case, {SIMULATE})
    if body is None:
        return case
    body = dict(body)
    start = body.get("start", "2024-01-01T00:00:00Z")
    span = body.get("span", "30d")
    if parse_duration(span) > SIMULATED_SPAN:
        body["span"] = f"{1 + zlib.crc32(span.encode()) % 24}h"
    policy = body["policy"]
    policy = SIMULATE_POLICY_TEXT if isinstance(policy, str) else _simulated_policy(policy)
    fleet = body["fleet"]
    if isinstance(fleet, str):
        fleet = FLEET_TEXT
        labels = yaml.safe_load(FLEET_TEXT)["fleet"]["labels"]
    else:
        fleet = _simulated_fleet(fleet, start)
        labels = fleet["fleet"].get("labels") or {}
    selector = _selector(policy)
    if not selector.matches(labels) and isinstance(fleet, dict):
        written = yaml.safe_load(policy) if isinstance(policy, str) else policy
        wanted = _labels_selected_by(written["spec"]["nodePoolSelector"], labels)
        if selector.matches(wanted) and accepts(LABELS, wanted):
            fleet = {**fleet, "fleet": {**fleet["fleet"], "labels": wanted}}
            labels = wanted
    if not selector.matches(labels):
        assert isinstance(policy, dict), "the example policy selects the example fleet"
        policy = {**policy, "spec": {**policy["spec"], "nodePoolSelector": {"matchLabels": labels}}}
    case.body = {**body, "policy": policy, "fleet": fleet}
    return case


def test_the_fuzzer_sends_both_kinds_of_data_and_runs_the_data_checks() -> None:
    assert set(_CONFIG.projects.default.generation.modes) == {
        GenerationMode.POSITIVE,
        GenerationMode.NEGATIVE,
    }
    # call_and_validate runs every registered check unless excluded; the data checks are two.
    assert {negative_data_rejection, positive_data_acceptance} <= set(CHECKS.get_all())
    assert response_schema_conformance in CHECKS.get_all()


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_no_input_is_a_server_error_and_every_response_conforms(case: schemathesis.Case) -> None:
    case.call_and_validate(
        excluded_checks=[not_a_server_error], additional_checks=[only_intended_5xx]
    )


class Workflow(schema.as_state_machine()):  # type: ignore[misc]
    """Sequences that follow the OpenAPI links: create a node, a token, a claim, a placement,
    then read, change and delete what was created (ids flow from one response to the next)."""

    def setup(self) -> None:
        """An empty ledger (each scenario starts from the same state, so Hypothesis can replay
        it) with one node that has room for anything, so claims and placements can succeed."""
        _empty_database()
        seed = schema["/v1/nodes/{name}"]["PUT"].Case(
            path_parameters={"name": "seed-node"},
            body={"threads": MAX_THREADS, "memory_mb": MAX_AMOUNT, "disk_gb": MAX_AMOUNT},
        )
        response = seed.call(headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert response.status_code in (200, 201), response.text

    def validate_response(
        self,
        response: Any,
        case: schemathesis.Case,
        additional_checks: Any = None,
        **kwargs: Any,
    ) -> None:
        """The same checks as the single-request test."""
        case.validate_response(
            response,
            excluded_checks=[not_a_server_error],
            additional_checks=[only_intended_5xx],
            transport_kwargs=kwargs or None,
        )


TestLinkedWorkflows = Workflow.TestCase
TestLinkedWorkflows.settings = settings(
    max_examples=15,
    stateful_step_count=8,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
