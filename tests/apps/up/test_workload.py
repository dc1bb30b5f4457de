"""The workload generator: a swinging target, the claim drawn down, synthetic node load."""

from __future__ import annotations

from datetime import timedelta

import pytest

from fleetgate.apps.up import workload as wl
from fleetgate.domain.capacity.dimensions import Resources
from fleetgate.domain.capacity.model import PlacementRequest
from tests.apps.up.conftest import Up


def test_the_target_swings_between_low_and_high_over_six_virtual_hours() -> None:
    assert wl.target_share(timedelta(0)) == pytest.approx(wl.LOW)
    assert wl.target_share(wl.SWING / 2) == pytest.approx(wl.HIGH)
    assert wl.target_share(wl.SWING) == pytest.approx(wl.LOW)
    samples = [wl.target_share(timedelta(minutes=m)) for m in range(0, 720, 7)]
    assert all(wl.LOW <= s <= wl.HIGH for s in samples)


async def test_seeding_creates_the_claim_and_fills_the_fleet(up: Up) -> None:
    nodes = await up.ledger.nodes()
    used = sum(n.used.cpus for n in nodes)
    assert used >= 0.4 * sum(n.limits.cpus for n in nodes)
    (claim,) = await up.ledger.claims()
    assert claim.namespace == "ci" and not claim.used.is_zero()  # drawn down by ci placements
    assert {p.namespace for p in await up.ledger.placements()} == {"ci", "web", "analytics"}
    assert all(n.metrics.cpu_schedulable == n.capacity.threads for n in nodes)


async def test_a_step_follows_the_target_most_of_the_time(up: Up) -> None:
    # At the start the target is 35% and the fleet was seeded to 40%: mostly releases.
    admitted, released = up.workload.admitted, up.workload.released
    for _ in range(4):
        await up.workload.step()
    assert up.workload.released - released > up.workload.admitted - admitted


async def test_node_load_follows_what_is_placed_on_it(up: Up) -> None:
    await up.workload.publish_metrics()
    for node in await up.ledger.nodes():
        load = node.metrics.cpu_load_1
        assert load is not None
        assert load <= 1.5 * node.capacity.threads
        if node.used.cpus == 0:
            assert load < 1.0


async def test_a_placement_made_through_the_api_is_never_released_by_the_generator(
    up: Up,
) -> None:
    mine = await up.container.placement_service().place(
        PlacementRequest("someone", Resources(1, 256, 1))
    )
    assert mine.placement is not None
    before = up.workload.released
    while await up.workload.release():  # everything the generator placed, then it stops
        pass
    assert up.workload.released > before
    left = await up.ledger.placements()
    assert [p.id for p in left] == [mine.placement.id]
