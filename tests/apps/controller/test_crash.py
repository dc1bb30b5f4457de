"""A controller killed right after any single write of a rotation, then restarted, finishes it.

Each scenario is first run cleanly to count its writes W; then, for every k in 1..W, a fresh
world crashes the controller right after its k-th write (the write took effect), starts a new
controller on the same cluster (startup sweep included), and checks the end state.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from fleetgate.adapters.fakecluster.faults import ControllerCrash
from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.policy import ForcefulFallback
from tests.apps.controller.world import World, policy

DUE = timedelta(days=14) - timedelta(hours=1)
LATE = timedelta(days=14) - timedelta(minutes=30)
HORIZON = timedelta(hours=2)


async def run_with_crashes(world: World, duration: timedelta) -> int:
    """Run for ``duration``, restarting the controller after every crash; return the crashes."""
    end = world.clock.now() + duration
    crashes = 0
    while True:
        try:
            await world.driver.run_until(end)
            return crashes
        except ControllerCrash:
            crashes += 1
            world.restart()


def leftovers(world: World) -> list[str]:
    """Anything a finished rotation must not leave behind."""
    out = []
    pool = world.pool_annotations()
    for key in (
        ann.ACTIVE_ROTATION,
        ann.ACTIVE_ROTATION_STATE,
        ann.DRAINING_AT,
        ann.SURGE_WAIT,
        ann.ROTATION_MODE,
    ):
        if key in pool:
            out.append(f"pool:{key}")
    for claim in world.cluster.claims.values():
        if claim.annotations.get(ann.CLAIM_STATE) in ("pending", "draining"):
            out.append(f"claim:{claim.name}")
        node = claim.node
        if node is not None and (
            node.unschedulable
            or ann.SURGE_FOR in node.annotations
            or ann.CORDONED in node.annotations
            or ann.DO_NOT_DISRUPT_OWNED in node.annotations
        ):
            out.append(f"node:{node.name}")
    out += [f"pod:{p.name}" for p in world.cluster.pods.values() if p.priority < 0]
    return out


def surge_world() -> tuple[World, str]:
    world = World()
    return world, world.node(DUE)


def fallback_world() -> tuple[World, str]:
    world = World(policy(forceful_fallback=ForcefulFallback(enabled=True)))
    return world, world.node(LATE)


def failing_world() -> tuple[World, str]:
    world = World()
    world.cluster.fail_provisioning("pool")
    return world, world.node(DUE)


def writes_of(make: Callable[[], tuple[World, str]], duration: timedelta) -> int:
    import asyncio

    world, _ = make()
    asyncio.run(world.driver.run_until(world.clock.now() + duration))
    return world.cluster.writes


SURGE_WRITES = writes_of(surge_world, HORIZON)
FALLBACK_WRITES = writes_of(fallback_world, HORIZON)
FAILING_WRITES = writes_of(failing_world, timedelta(minutes=20))


def test_the_scenarios_have_enough_side_effects_to_be_meaningful() -> None:
    assert SURGE_WRITES >= 10 and FALLBACK_WRITES >= 4 and FAILING_WRITES >= 8


@pytest.mark.parametrize("k", range(1, SURGE_WRITES + 1))
async def test_a_surge_rotation_survives_a_crash_after_write(k: int) -> None:
    world, old = surge_world()
    world.cluster.crash_after(k)
    crashes = await run_with_crashes(world, HORIZON)
    assert crashes == 1
    assert old not in world.cluster.claims
    assert leftovers(world) == []
    assert ann.LAST_ROTATION_AT in world.pool_annotations()
    # The workload moved to exactly one replacement; nothing breached its expiry.
    (claim,) = world.cluster.claims.values()
    assert [p.name for p in world.cluster.pods.values() if p.node_name == claim.name] == [
        f"{old}-app"
    ]
    assert world.cluster.breaches == []


@pytest.mark.parametrize("k", range(1, FALLBACK_WRITES + 1))
async def test_a_forceful_fallback_survives_a_crash_after_write(k: int) -> None:
    world, old = fallback_world()
    world.cluster.crash_after(k)
    assert await run_with_crashes(world, HORIZON) == 1
    assert old not in world.cluster.claims
    assert leftovers(world) == []
    assert world.pool_annotations().get(ann.LAST_ROTATION_AT)
    assert world.cluster.breaches == []


@pytest.mark.parametrize("k", range(1, FAILING_WRITES + 1))
async def test_a_failing_surge_rolls_back_cleanly_despite_a_crash_after_write(k: int) -> None:
    world, old = failing_world()
    world.cluster.crash_after(k)
    assert await run_with_crashes(world, timedelta(minutes=20)) == 1
    assert leftovers(world) == []
    claim = world.claim_annotations(old)
    assert claim[ann.CLAIM_STATE] == "failed"
    assert claim[ann.RETRY_COUNT] == "1"
    assert ann.LAST_FAILURE_AT in world.pool_annotations()
    assert set(world.cluster.claims) == {old}  # the surge claim that never came up was reaped
