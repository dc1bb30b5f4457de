"""The walk's report: its events in the spec's order, and facts a replay reads back unchanged."""

from __future__ import annotations

from datetime import UTC, datetime
from random import Random

from fleetgate.domain.capacity import report as r
from fleetgate.domain.capacity.denials import Denial, DimensionDetail, Stage
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.model import (
    Admission,
    NodeMetrics,
    NodeState,
    Placement,
    PlacementRequest,
)
from fleetgate.domain.capacity.ranking import Candidates
from fleetgate.domain.capacity.walk import Walk
from fleetgate.domain.events import Event, Level

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ONE = Resources(1, 100, 1)
CPUS = Denial(Stage.NODE, (DimensionDetail("cpus", 24, 24, 1, True),))
DEMAND = Denial(Stage.NODE, (DimensionDetail("demand", 6.0, 9.0, 0.6, True),))
OVER = (DimensionDetail("cpus", 2, 2, 1, True),)


def stamp(
    kind: str, subject: str, ns: str | None, level: Level = Level.INFO, /, **data: object
) -> Event:
    return Event(kind, T0, subject, ns, level, dict(data))


def node(name: str) -> NodeState:
    return NodeState(
        name=name, pool="", labels={}, capacity=Capacity(8, 1000, 100),
        limits=Resources(24, 1000, 100), used=Resources(), expected_demand=0.0,
        metrics=NodeMetrics(0.0, 8), schedulable=True, updated_at=T0,
    )  # fmt: skip


def walked(request: PlacementRequest) -> tuple[Walk, r.WalkReport]:
    candidates = Candidates([node("a"), node("b"), node("c")], 0.75)
    order = candidates.order(Random(1))
    walk = Walk((x.node.name for x in order), {"c": CPUS}.get)
    return walk, r.WalkReport(stamp, "s-1", request, candidates, order, walk)


def test_an_admission_after_refusals_and_the_waiver_reports_them_in_order_with_its_facts() -> None:
    request = PlacementRequest("team", ONE)
    walk, report = walked(request)
    events: list[Event] = []
    while (step := walk.next_attempt()) is not None or walk.needs_recheck:
        if step is None:
            walk.rechecked(None)  # "c" stays presumed: nothing else to try on the first pass
            continue
        report.attempting(step)
        if step.enforce_demand:
            walk.refused(step.node, DEMAND)
            report.refused(step, DEMAND)
            continue
        walk.admitted(step.node)
        placement = Placement("s-1", "team", step.node, ONE, 0.6, T0)
        made = Admission(placement=placement, claim_id="k", claim_over_limit=OVER)
        events = report.admitted(made, walk.attempts, step.enforce_demand)
    kinds = [e.kind for e in events]
    refused = [r.REFUSED] * 2  # "a" and "b" were tried; "c" is named, never tried
    assert kinds == [r.FINAL_CANDIDATES, *refused, r.WAIVING, r.PLACED, r.OVER_CLAIM]
    assert events[0].data["presumed_full"] == ["c"]
    facts = r.PlacementFacts.from_events(events)
    assert facts == r.PlacementFacts(demand_waived=True, over_claim=OVER)


def test_a_failed_walk_reports_every_refusal_then_the_failure() -> None:
    walk, report = walked(PlacementRequest("team", ONE))
    while (step := walk.next_attempt()) is not None:
        report.attempting(step)
        walk.refused(step.node, CPUS)
        report.refused(step, CPUS)
    walk.rechecked(None)
    assert walk.next_attempt() is None
    events = report.failed()
    # "c" was presumed full and never tried: named first, detailed in the failure.
    assert [e.kind for e in events] == [r.FINAL_CANDIDATES, *[r.REFUSED] * 2, r.FAILED]
    assert events[0].data["presumed_full"] == ["c"]
    assert events[-1].level is Level.WARNING and set(events[-1].data["denials"]) == {"a", "b", "c"}
    assert r.PlacementFacts.from_events(events) == r.PlacementFacts()
