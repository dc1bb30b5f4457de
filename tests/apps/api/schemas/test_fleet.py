"""The fleet file's published schema against the simulator's loader: what one admits, the other
loads (within the rules the descriptions state), and the instants and durations it admits stay
inside the calendar."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from fleetgate.apps.api.schemas.durations import (
    POSITIVE_SIMULATION_DURATION,
    SIMULATION_DURATION,
)
from fleetgate.apps.api.schemas.fleet import (
    INSTANT,
    MAX_SIMULATE_NODES,
    FleetFile,
    fleet_document,
)
from fleetgate.apps.simulate.fleet import FleetError, load_fleet
from fleetgate.domain.durations import parse_duration
from fleetgate.domain.rotation.annotations import parse_timestamp
from fleetgate.domain.rotation.budgets import BudgetError, read_schedule
from tests.strategies import from_json_schema, matching

EXAMPLES = Path(__file__).resolve().parents[4] / "examples"
SCHEMA = FleetFile.model_json_schema()
START = "2024-01-01T00:00:00Z"


def _broken_rule(document: dict[str, Any], start: datetime) -> str | None:
    """The field of the first rule the descriptions state that ``document`` breaks, in the
    loader's order (per node: its name, its createdAt, its disruptedAt), or None."""
    seen: set[str] = set()
    for index, node in enumerate(document["fleet"].get("nodes") or ()):
        path = f"fleet.nodes[{index}]"
        if node["name"] in seen:
            return f"{path}.name"
        seen.add(node["name"])
        created = parse_timestamp(node["createdAt"])
        assert created is not None
        if created > start:
            return f"{path}.createdAt"
        disrupted = node.get("disruptedAt")
        if disrupted is not None and (parse_timestamp(disrupted) or start) < start:
            return f"{path}.disruptedAt"
    for index, budget in enumerate(document["fleet"].get("budgets") or ()):
        path = f"fleet.budgets[{index}]"
        scheduled = budget.get("schedule") is not None
        if scheduled != (budget.get("duration") is not None):
            return path
        if scheduled:
            try:
                read_schedule(budget["schedule"])
            except BudgetError:
                return f"{path}.schedule"
    return None


def _latest_birth(document: dict[str, Any]) -> datetime:
    """A start no listed node is born after (the simulation's default for a generated fleet)."""
    births = [parse_timestamp(n["createdAt"]) for n in document["fleet"].get("nodes") or ()]
    return max((b for b in births if b is not None), default=parse_timestamp(START) or START_AT)


START_AT = datetime(2024, 1, 1, tzinfo=UTC)


@settings(max_examples=300, deadline=None)
@given(from_json_schema(SCHEMA), st.none() | matching(INSTANT))
def test_every_fleet_the_schema_admits_loads_within_the_stated_rules(
    document: dict[str, Any], start_text: str | None
) -> None:
    jsonschema.validate(document, SCHEMA)  # the strategy keeps to the document it was drawn from
    start = _latest_birth(document) if start_text is None else parse_timestamp(start_text)
    assert start is not None
    data = fleet_document(document)  # the model admits what its published schema admits
    # The YAML text form, read back, is held to the same model and comes out the same.
    assert fleet_document(yaml.safe_load(yaml.safe_dump(document))) == data
    broken = _broken_rule(data, start)
    if broken is None:
        fleet = load_fleet(data, start)
        spec = data["fleet"]
        expected = len(spec["nodes"]) if "nodes" in spec else spec["generate"]["count"]
        assert len(fleet.nodes) == expected
    else:
        with pytest.raises(FleetError, match=re.escape(broken)):
            load_fleet(data, start)


@pytest.mark.parametrize("name", ["generated", "listed", "karpenter", "infeasible"])
def test_the_example_fleet_files_are_admitted(name: str) -> None:
    document = yaml.safe_load((EXAMPLES / f"fleet-{name}.yaml").read_text())
    jsonschema.validate(document, SCHEMA)
    load_fleet(fleet_document(document), START_AT)


@settings(max_examples=300, deadline=None)
@given(matching(INSTANT))
def test_an_admitted_instant_is_one_the_loader_reads_and_far_from_the_calendar_edges(
    text: str,
) -> None:
    instant = parse_timestamp(text)
    assert instant is not None
    # Written in the years 2000 to 2999, with an offset of under a day either way.
    assert datetime(1999, 12, 30, tzinfo=UTC) < instant < datetime(3000, 1, 2, tzinfo=UTC)


@settings(max_examples=300, deadline=None)
@given(matching(SIMULATION_DURATION))
def test_an_admitted_duration_stays_under_220_years(text: str) -> None:
    assert timedelta(0) <= parse_duration(text) < timedelta(days=220 * 365)


@settings(max_examples=300, deadline=None)
@given(matching(POSITIVE_SIMULATION_DURATION))
def test_an_admitted_positive_duration_is_more_than_zero(text: str) -> None:
    assert timedelta(0) < parse_duration(text) < timedelta(days=220 * 365)


@pytest.mark.parametrize(
    ("text", "admitted"),
    [
        ("2024-01-01T00:00:00Z", True),
        ("2024-02-29T23:59:59.123456789+09:00", True),  # a leap year
        ("2000-02-29T00:00:00z", True),  # a century leap year
        ("2100-02-29T00:00:00Z", False),  # a century that is not
        ("2024-04-31T00:00:00Z", False),
        ("1999-12-31T23:59:59Z", False),  # before the years a simulation takes
        ("3000-01-01T00:00:00Z", False),
        ("2024-01-01T00:00:60Z", False),  # Python's datetime has no leap second
        ("2024-01-01T00:00:00", False),  # no offset
        ("2024-01-01 00:00:00Z", False),
    ],
)
def test_the_instant_pattern_admits_exactly_these(text: str, admitted: bool) -> None:
    assert bool(re.fullmatch(INSTANT, text)) is admitted


def _generated(**fleet: Any) -> dict[str, Any]:
    return {"fleet": {"expireAfter": "14d", "generate": {"count": 3}, **fleet}}


def _listed(**node: Any) -> dict[str, Any]:
    return {"fleet": {"expireAfter": "14d", "nodes": [{"name": "a", "createdAt": START, **node}]}}


@pytest.mark.parametrize(
    ("document", "field"),
    [
        (_generated(generate={"count": True}), "fleet.generate.count"),  # no boolean for a number
        (_generated(generate={"count": MAX_SIMULATE_NODES + 1}), "fleet.generate.count"),
        (_generated(generate={"count": 0}), "fleet.generate.count"),
        (_generated(replicas=False), "fleet.replicas"),
        (_generated(limits={"nodes": True}), "fleet.limits.nodes"),
        (_generated(ready=1), "fleet.ready"),
        (_generated(expireAfter="10000d"), "fleet.expireAfter"),  # four digits a component
        (_generated(expireAfter="0s"), "fleet.expireAfter"),
        (_generated(terminationGracePeriod="-1h"), "fleet.terminationGracePeriod"),
        (_generated(labels={"team": 7}), "fleet.labels.team"),
        (_generated(colour="blue"), "fleet.colour"),  # an unknown field
        (_generated(nodes=[]), "fleet.nodes"),  # both forms at once
        ({"fleet": {"expireAfter": "14d"}}, "fleet"),  # neither
        ({"fleet": {"generate": {"count": 3}}}, "fleet.expireAfter"),
        (_listed(createdAt="1999-12-31T00:00:00Z"), "fleet.nodes.0.createdAt"),
        (_listed(disruptedAt="2024-02-30T00:00:00Z"), "fleet.nodes.0.disruptedAt"),
        (_listed(doNotDisrupt="false"), "fleet.nodes.0.doNotDisrupt"),
        (_listed(drifted="yes"), "fleet.nodes.0.drifted"),
        ({**_generated(), "env": {"drain": 5}}, "env.drain"),
        ({**_generated(), "extra": {}}, "extra"),
    ],
)
def test_what_the_schema_refuses_names_the_field(document: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as refused:
        FleetFile.model_validate(document)
    # A location also holds the names of union members (the form, listed or generated; the
    # branch of an Optional): the API names only the client's keys (routes/test_rotation.py).
    named = [
        ".".join(str(p) for p in error["loc"] if p not in ("listed", "generated"))
        for error in refused.value.errors()
    ]
    assert any(n == field or n.startswith(f"{field}.") for n in named), named


def test_a_listed_node_count_is_bounded() -> None:
    nodes = [{"name": f"n{i}", "createdAt": START} for i in range(MAX_SIMULATE_NODES + 1)]
    with pytest.raises(ValidationError, match="at most 2000 items"):
        FleetFile.model_validate({"fleet": {"expireAfter": "14d", "nodes": nodes}})


def test_yaml_timestamps_are_read_as_the_instants_they_are() -> None:
    # Unquoted, YAML makes a datetime of them (as the CLI's reader does); one without an offset
    # is refused, as the loader refuses it.
    text = "fleet: {expireAfter: 14d, nodes: [{name: a, createdAt: 2023-12-20T08:00:00Z}]}"
    node = fleet_document(yaml.safe_load(text))["fleet"]["nodes"][0]
    assert parse_timestamp(node["createdAt"]) == datetime(2023, 12, 20, 8, tzinfo=UTC)
    naive = "fleet: {expireAfter: 14d, nodes: [{name: a, createdAt: 2023-12-20 08:00:00}]}"
    with pytest.raises(ValidationError, match="timezone"):
        fleet_document(yaml.safe_load(naive))
