"""Every transition of spec §7.10, played by the real controller on the fake cluster."""

from __future__ import annotations

from datetime import timedelta

from fleetgate.domain.rotation import annotations as ann
from tests.apps.controller.world import World, policy

DUE = timedelta(days=14) - timedelta(hours=1)  # triggered: inside the 1h19m lead time
M = timedelta(minutes=1)


def anchored(world: World) -> str | None:
    return world.pool_annotations().get(ann.ACTIVE_ROTATION)


def markers_left(world: World) -> list[str]:
    """Nodes still carrying any fleetgate marker or our cordon, and placeholders left."""
    left = [
        n.name
        for c in world.cluster.claims.values()
        if (n := c.node) is not None
        and (n.unschedulable or any(k.startswith(ann.PREFIX) for k in n.annotations))
    ]
    left += [p.name for p in world.cluster.pods.values() if p.priority < 0]
    return left


async def test_picked_for_surge_goes_pending_with_anchor_freeze_cordon_and_placeholder() -> None:
    world = World()
    old = world.node(DUE)
    result = await world.pass_once()
    assert result.step is not None and result.step.started == old
    assert anchored(world) == old
    claim = world.claim_annotations(old)
    assert claim[ann.CLAIM_STATE] == "pending" and ann.STARTED_AT in claim
    node = world.cluster.claims[old].node
    assert node is not None and node.unschedulable
    assert node.annotations[ann.SURGE_FOR] == old
    assert node.annotations[ann.KARPENTER_DO_NOT_DISRUPT] == "true"
    assert [p.name for p in world.cluster.pods.values() if p.priority < 0] == [
        f"fleetgate-surge-{old}"
    ]
    assert "RotationStarted" in world.events.kinds()


async def test_surge_ready_starts_the_drain_and_the_drained_claim_is_a_success() -> None:
    world = World()
    old = world.node(DUE)
    await world.pass_once()
    await world.run(2 * M + 30 * timedelta(seconds=1))
    pool = world.pool_annotations()
    assert pool[ann.ACTIVE_ROTATION_STATE] == "draining"
    assert pool[ann.SURGE_WAIT] == "2m" and ann.DRAINING_AT in pool
    assert world.cluster.claims[old].deleting_at is not None
    assert world.claim_annotations(old)[ann.CLAIM_STATE] == "draining"
    host = next(c.node for c in world.cluster.claims.values() if c.name != old)
    assert host is not None and host.annotations[ann.SURGE_FOR] == old
    await world.run(10 * M)
    assert old not in world.cluster.claims
    assert anchored(world) is None and ann.LAST_ROTATION_AT in world.pool_annotations()
    assert world.metric("fleetgate_rotation_completed_total", outcome="success") == 1
    assert world.metric("fleetgate_rotation_duration_seconds_count", phase="drain") == 1
    assert markers_left(world) == []
    assert "RotationCompleted" in world.events.kinds()


async def test_ready_timeout_rolls_back_and_fails_the_attempt() -> None:
    world = World()
    old = world.node(DUE)
    world.cluster.fail_provisioning("pool")
    await world.run(16 * M)
    claim = world.claim_annotations(old)
    assert claim[ann.CLAIM_STATE] == "failed"
    assert claim[ann.RETRY_COUNT] == "1" and ann.FAILED_AT in claim
    assert ann.STARTED_AT not in claim and ann.SURGE_CLAIM not in claim
    assert anchored(world) is None and ann.LAST_FAILURE_AT in world.pool_annotations()
    assert world.cluster.claims.keys() == {old}  # the never-ready surge claim was reaped
    assert markers_left(world) == []
    assert world.metric("fleetgate_rotation_completed_total", outcome="failure") == 1
    assert "RotationFailed" in world.events.kinds()


async def test_a_pending_claim_being_deleted_is_expired() -> None:
    world = World()
    old = world.node(DUE)
    world.cluster.fail_provisioning("pool")
    await world.pass_once()
    world.cluster.stick_drain(old)
    await world.cluster.delete_claim(old)
    await world.pass_once()
    assert world.claim_annotations(old)[ann.CLAIM_STATE] == "expired"
    assert anchored(world) is None
    assert world.metric("fleetgate_rotation_completed_total", outcome="expired") == 1
    assert [p for p in world.cluster.pods.values() if p.priority < 0] == []


async def test_a_claim_that_vanished_without_a_mirror_is_expired() -> None:
    world = World(drain="0s")
    old = world.node(DUE)
    world.cluster.fail_provisioning("pool")
    await world.pass_once()
    await world.cluster.delete_claim(old)  # gone before the next look (no drain time)
    world.cluster.catch_up()
    assert old not in world.cluster.claims
    await world.pass_once()
    assert anchored(world) is None
    assert world.metric("fleetgate_rotation_completed_total", outcome="expired") == 1
    assert markers_left(world) == []


async def test_a_failed_claim_is_retried_after_its_backoff_and_the_failure_pause() -> None:
    world = World(policy(retry_backoff=timedelta(minutes=30)))
    old = world.node(DUE)
    world.cluster.fail_provisioning("pool")
    await world.run(16 * M)  # failed at ~15m30s
    failed_at = ann.parse_timestamp(world.claim_annotations(old)[ann.FAILED_AT])
    assert failed_at is not None
    world.cluster.fail_provisioning("pool", on=False)
    await world.run(20 * M)
    assert world.claim_annotations(old)[ann.CLAIM_STATE] == "failed"  # still backing off
    await world.run(15 * M)
    claim = world.claim_annotations(old)
    assert claim[ann.CLAIM_STATE] in ("pending", "draining")
    assert claim[ann.RETRY_COUNT] == "1"  # kept across the retry
    started = ann.parse_timestamp(claim.get(ann.STARTED_AT))
    assert started is not None and started - failed_at >= timedelta(minutes=30)
    await world.run(15 * M)
    assert old not in world.cluster.claims and anchored(world) is None


async def test_a_failed_anchored_claim_being_deleted_is_expired() -> None:
    world = World()
    old = world.node(DUE)
    world.cluster.stick_drain(old)
    await world.cluster.annotate_claim(old, {ann.CLAIM_STATE: "failed"})
    await world.cluster.annotate_pool("pool", {ann.ACTIVE_ROTATION: old})
    await world.cluster.delete_claim(old)
    await world.pass_once()
    assert anchored(world) is None
    assert world.metric("fleetgate_rotation_completed_total", outcome="expired") == 1


async def test_an_expired_claim_still_anchored_is_cleaned_up_without_a_metric() -> None:
    world = World()
    old = world.node(DUE)
    await world.cluster.annotate_claim(old, {ann.CLAIM_STATE: "expired"})
    await world.cluster.annotate_pool("pool", {ann.ACTIVE_ROTATION: old})
    await world.pass_once()
    assert anchored(world) is None
    assert world.metric("fleetgate_rotation_completed_total", outcome="expired") is None


async def test_a_claim_too_close_to_its_deadline_is_drained_surge_less_when_enabled() -> None:
    world = World(policy(forceful_fallback=_fallback(True)))
    old = world.node(timedelta(days=14) - timedelta(minutes=30))
    result = await world.pass_once()
    assert result.step is not None and result.step.started == old
    pool = world.pool_annotations()
    assert pool[ann.ROTATION_MODE] == "forceful-fallback"
    assert pool[ann.ACTIVE_ROTATION_STATE] == "draining" and ann.SURGE_WAIT not in pool
    assert world.cluster.claims[old].deleting_at is not None
    assert [p for p in world.cluster.pods.values() if p.priority < 0] == []
    assert world.metric("fleetgate_rotation_forceful_fallback_total") == 1
    assert "ForcefulFallback" in world.events.kinds()
    await world.run(10 * M)
    assert world.metric("fleetgate_rotation_completed_total", outcome="success") == 1
    assert world.cluster.breaches == []


async def test_without_the_opt_in_a_late_claim_still_surges() -> None:
    world = World()
    old = world.node(timedelta(days=14) - timedelta(minutes=30))
    await world.pass_once()
    assert world.claim_annotations(old)[ann.CLAIM_STATE] == "pending"
    assert ann.ROTATION_MODE not in world.pool_annotations()


def _fallback(enabled: bool):  # type: ignore[no-untyped-def]
    from fleetgate.domain.rotation.policy import ForcefulFallback

    return ForcefulFallback(enabled=enabled)
