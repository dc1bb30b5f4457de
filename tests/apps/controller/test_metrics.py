"""The controller's series: the convention-following names, and their deprecated aliases."""

from __future__ import annotations

from datetime import timedelta

from fleetgate.domain.rotation import annotations as ann
from tests.apps.controller.world import World, policy


async def test_renamed_series_and_their_deprecated_aliases_carry_the_same_values() -> None:
    world = World()
    world.node(timedelta(days=1))
    await world.cluster.annotate_pool("pool", {ann.FREEZE: "2024-01-01T06:00:00Z"})
    await world.pass_once()
    chances = world.metric("fleetgate_rotation_guaranteed_chances")
    assert chances is not None and chances >= 1
    assert world.metric("fleetgate_rotation_rotation_chances") == chances
    freeze = world.metric("fleetgate_rotation_freeze_until_timestamp_seconds")
    assert freeze is not None and freeze > 0
    assert world.metric("fleetgate_rotation_freeze_until_timestamp") == freeze


async def test_the_aliases_are_dropped_with_the_pool_s_other_series() -> None:
    world = World([policy("a"), policy("b")])  # conflicting: only policy_conflict remains
    world.node(timedelta(days=1))
    await world.pass_once()
    assert world.metric("fleetgate_rotation_policy_conflict") == 1
    for name in ("guaranteed_chances", "rotation_chances", "freeze_until_timestamp"):
        assert world.metric(f"fleetgate_rotation_{name}") is None


async def test_a_pass_that_moves_one_gauge_leaves_every_series_as_a_fresh_controller_sets_it() -> (
    None
):
    world = World()
    world.node(timedelta(days=1))
    await world.pass_once()
    await world.cluster.annotate_pool("pool", {ann.FREEZE: "2024-01-01T06:00:00Z"})
    await world.pass_once()  # only the freeze gauges moved: only they are set again
    fresh = World()
    fresh.node(timedelta(days=1))
    await fresh.cluster.annotate_pool("pool", {ann.FREEZE: "2024-01-01T06:00:00Z"})
    await fresh.pass_once()
    names = [
        "fleetgate_rotation_freeze_until_timestamp_seconds",
        "fleetgate_rotation_freeze_until_timestamp",
        "fleetgate_rotation_guaranteed_chances",
        "fleetgate_rotation_in_progress",
        "fleetgate_rotation_candidates",
    ]
    assert world.metric(names[0]) not in (None, 0)
    assert [world.metric(n) for n in names] == [fresh.metric(n) for n in names]
