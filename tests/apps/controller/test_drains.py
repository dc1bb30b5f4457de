"""Which writes of a pass begin a reserved drain, and which give one up (gate 9, issue 41)."""

from __future__ import annotations

from datetime import UTC, datetime

from fleetgate.adapters.clock import VirtualClock
from fleetgate.apps.controller.drains import drains, given_up
from fleetgate.domain.capacity.relocation import Move, Verdict
from fleetgate.domain.rotation import actions as act
from fleetgate.domain.rotation.annotations import CLAIM_STATE, ClaimState
from tests.e2e.test_rotate_held_for_capacity import node_of, rig

T0 = datetime(2024, 1, 1, tzinfo=UTC)


async def test_a_deletion_with_planned_moves_is_a_drain_to_reserve_for() -> None:
    cluster, big, small = rig(VirtualClock(T0), young=True)
    obs = await cluster.observe("general")
    assert obs is not None
    planned = Verdict(node_of(cluster, big), 1, moves=(Move("p", node_of(cluster, small[0])),))
    empty = Verdict(node_of(cluster, small[1]), 0)
    verdicts = {planned.node: planned, empty.node: empty}
    deletions = [act.DeleteClaim(big), act.DeleteClaim(small[1]), act.DeleteClaim("gone")]
    assert drains(obs, deletions, verdicts) == [(big, planned)]
    assert drains(obs, [act.AnnotateClaim(big, {CLAIM_STATE: "draining"})], verdicts) == []


async def test_a_rotation_failed_before_its_drain_gives_its_room_back() -> None:
    cluster, big, small = rig(VirtualClock(T0), young=True)
    await cluster.delete_claim(small[1])  # being drained: its room is still needed
    obs = await cluster.observe("general")
    assert obs is not None
    failed = {CLAIM_STATE: ClaimState.FAILED.value}
    written = [
        act.AnnotateClaim(big, failed),
        act.AnnotateClaim(small[0], {CLAIM_STATE: ClaimState.PENDING.value}),
        act.AnnotateClaim(small[1], failed),
    ]
    assert given_up(obs, written) == [node_of(cluster, big)]
