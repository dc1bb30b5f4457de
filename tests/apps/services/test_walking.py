"""The one walk driver: it records refusals, skips, ends on an admission, waives once."""

from __future__ import annotations

from fleetgate.apps.services.walking import try_candidates
from fleetgate.domain.capacity.denials import Denial, DimensionDetail, Stage
from fleetgate.domain.capacity.dimensions import Resources
from fleetgate.domain.capacity.model import Admission, Placement
from fleetgate.domain.capacity.walk import Attempt, Walk
from tests.ledgers import START

DEMAND = Denial(Stage.NODE, (DimensionDetail("demand", 6.0, 9.0, 0.6, True),))
CPUS = Denial(Stage.NODE, (DimensionDetail("cpus", 12, 12, 1, True),))


def admitted(node: str) -> Admission:
    return Admission(placement=Placement("p", "ns", node, Resources(1, 1, 1), 0.6, START))


async def test_refusals_are_recorded_and_the_waiver_admits_on_a_demand_only_refusal() -> None:
    tried: list[Attempt] = []
    outcomes = {("a", True): DEMAND, ("b", True): CPUS, ("a", False): None}

    async def attempt(step: Attempt) -> Admission | None:
        tried.append(step)
        denial = outcomes[(step.node, step.enforce_demand)]
        return admitted(step.node) if denial is None else Admission(denial=denial)

    walk = Walk(["a", "b"])
    result = await try_candidates(walk, attempt)
    assert [(t.node, t.enforce_demand) for t in tried] == [("a", True), ("b", True), ("a", False)]
    assert result is not None and result.placement is not None and result.placement.node == "a"
    assert walk.admitted_on == "a" and walk.waived and walk.denials == {"a": DEMAND, "b": CPUS}


async def test_a_skipped_candidate_is_no_refusal_and_the_last_refusal_is_returned() -> None:
    async def attempt(step: Attempt) -> Admission | None:
        return None if step.node == "gone" else Admission(denial=CPUS)

    walk = Walk(["gone", "full"])
    result = await try_candidates(walk, attempt)
    assert result is not None and result.denial is CPUS
    assert walk.admitted_on is None and walk.denials == {"full": CPUS} and not walk.waived


async def test_nothing_tried_returns_none() -> None:
    async def attempt(step: Attempt) -> Admission | None:
        return None

    assert await try_candidates(Walk(["gone"]), attempt) is None
    assert await try_candidates(Walk([]), attempt) is None
