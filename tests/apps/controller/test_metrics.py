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
