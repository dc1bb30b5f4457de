"""The ledger read behind gate 9: verdicts per pool node, and the status that reports them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from random import Random

import pytest

from fleetgate.adapters.clock import VirtualClock
from fleetgate.apps.api.schemas.status import PoolRotationBody
from fleetgate.apps.services.nodesync import NodeSync
from fleetgate.apps.services.relocation import RelocationCheck
from fleetgate.apps.services.rotationstatus import RotationStatus
from fleetgate.domain import nodesync
from fleetgate.domain.capacity.claims import ClaimRequest
from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.model import AdmitRequest, NodeMetrics, NodeSpec
from fleetgate.domain.rotation.policy import RotationPolicy
from tests.conftest import Backend
from tests.e2e.test_rotate_held_for_capacity import SIZE, load_placements, rig
from tests.e2e.test_rotate_loaded_fleet import POLICY
from tests.invariants import check_ledger
from tests.ledgers import open_ledger

T0 = datetime(2024, 1, 1, tzinfo=UTC)


async def _policies() -> list[RotationPolicy]:
    return [POLICY]


async def test_each_node_the_ledger_holds_is_planned_and_the_status_judges_as_the_controller(
    backend: Backend,
) -> None:
    clock = VirtualClock(T0)
    cluster, big, small = rig(clock, young=True)
    async with open_ledger(backend, clock) as ledger:
        sync = NodeSync(ledger, cluster, clock, ledger.event_sink(), DemandPolicy())
        await sync.sync()
        check = RelocationCheck(ledger, DemandPolicy())
        obs = await cluster.observe("general")
        assert obs is not None
        empty = await check.verdicts(obs)  # nothing placed yet: every node fits
        assert set(empty) == {n.name for n in obs.nodes} and all(v.fits for v in empty.values())
        await load_placements(ledger, cluster, big, small)
        verdicts = await check.verdicts(obs)
        big_node = cluster.claims[big].node
        assert big_node is not None
        assert set(verdicts) == {n.name for n in obs.nodes}
        # No surge is counted: the small nodes are full, big has 4 vCPU free.
        assert verdicts[big_node.name].shortfall() == Resources(20, 0, 0)
        assert all(not v.fits for v in verdicts.values())
        # The status asks the ledger exactly when the controller would, and decides the same:
        # none fits now, so the oldest starts on its surge (no hold at the start).
        status = RotationStatus(cluster, _policies, clock, relocation=check)
        reads = check.reads
        (pool,) = await status.pools()
        body = PoolRotationBody.of(pool)
        assert check.reads == reads + 1 and body.rotating == big and body.ledger_hold is None
        (blind,) = await RotationStatus(cluster, _policies, clock).pools()
        assert PoolRotationBody.of(blind).rotating == big


@pytest.mark.parametrize("enforcement", ["advisory", "hard"])
@pytest.mark.parametrize("seed", range(4))
async def test_the_verdict_is_the_relocation_the_node_sync_then_makes(
    backend: Backend, enforcement: str, seed: int
) -> None:
    """Issue 41 item 3: the gate's verdict and the sync's relocation are one plan. On a random
    fragmented ledger (some placements have nowhere to go), the sync moves each placement to
    the very node the verdict names and leaves behind the very placements it strands, in both
    claim enforcement modes (a move never touches the claim side)."""
    rng = Random(seed)
    clock = VirtualClock(T0)
    async with open_ledger(backend, clock, enforcement=enforcement) as ledger:
        for i, threads in enumerate((4, 2, 3, 2, 4)):
            await ledger.add_node(NodeSpec(f"n{i}", Capacity(threads, 8192, 100), "general"))
            busy = rng.choice([None, 0.5, 5.0])  # unknown, idle, or above the demand budget
            await ledger.publish_metrics(f"n{i}", NodeMetrics(busy, None if busy is None else 4))
        made = await ledger.create_claim(ClaimRequest("team", Resources(12, 8192, 60), 86400))
        assert made.ok
        for _ in range(40):  # enough to fill most nodes: some placements have nowhere to go
            size = Resources(rng.choice([1, 2, 3, 4]), rng.choice([256, 1024]), 5)
            node = f"n{rng.randrange(5)}"
            await ledger.admit(AdmitRequest(rng.choice(["team", "web"]), node, size))
        source = "n0"
        verdicts = await RelocationCheck(ledger, DemandPolicy()).judge_nodes([source])
        verdict = verdicts[source]
        # The same ledger, read again, gets the same plan.
        assert await RelocationCheck(ledger, DemandPolicy()).judge_nodes([source]) == verdicts
        await ledger.cordon(source)
        sync = NodeSync(ledger, None, clock, ledger.event_sink(), DemandPolicy())  # type: ignore[arg-type]
        moved, stranded = await sync.relocate(source)
        assert (moved, stranded) == (len(verdict.moves), len(verdict.stranded))
        now = {p.id: p.node for p in await ledger.placements()}
        assert {pid: now[pid] for pid, _ in verdict.targets} == dict(verdict.targets)
        assert all(now[pid] == source for pid in verdict.stranded)
        await check_ledger(ledger, set(now))


async def test_what_other_departures_must_move_counts_against_the_plans_room(
    backend: Backend,
) -> None:
    """Issue 41 item 4: ``gone`` (another pool's node the sync took out of service: a rotation
    in progress, or stranded placements) must still place its two 4-vCPU placements; the spare
    room is theirs first. An operator's own cordon (no marker) is no departure."""
    clock = VirtualClock(T0)
    async with open_ledger(backend, clock) as ledger:
        marker = {nodesync.CORDONED: "true", nodesync.SOURCE: "true"}
        await ledger.add_node(NodeSpec("a", Capacity(4, 8192, 100), "p"))
        await ledger.add_node(NodeSpec("spare", Capacity(4, 8192, 100), "p"))
        await ledger.add_node(NodeSpec("gone", Capacity(4, 8192, 100), "q", marker))
        for node in ("a", "a", "gone", "gone"):
            assert (await ledger.admit(AdmitRequest("team", node, Resources(4, 512, 5)))).admitted
        check = RelocationCheck(ledger, DemandPolicy())
        assert (await check.judge_nodes(["a"]))["a"].fits  # gone still takes work
        await ledger.cordon("gone")
        behind = (await check.judge_nodes(["a"]))["a"]
        assert len(behind.moves) == 1 and len(behind.stranded) == 1
        await ledger.update_node(NodeSpec("gone", Capacity(4, 8192, 100), "q", {}))
        assert (await check.judge_nodes(["a"]))["a"].fits  # an operator's cordon


async def test_a_drain_s_plan_is_reserved_for_its_ttl_judged_again_with_its_own_room(
    backend: Backend,
) -> None:
    """Issue 41, reserve before you drain: the reservation holds every planned move until the
    TTL; judged again, the node's plan counts its own reserved room as its own (it still fits),
    another node's plan does not; a refused reserve writes nothing; release hands it back."""
    clock = VirtualClock(T0)
    cluster, big, small = rig(clock, young=False)
    async with open_ledger(backend, clock) as ledger:
        sync = NodeSync(ledger, cluster, clock, ledger.event_sink(), DemandPolicy())
        await sync.sync()
        ids = await load_placements(ledger, cluster, big, small, per_small=2)
        check = RelocationCheck(ledger, DemandPolicy(), timedelta(minutes=5))
        source = cluster.claims[small[0]].node
        assert source is not None
        (verdict,) = (await check.judge_nodes([source.name])).values()
        assert verdict.fits and len(verdict.moves) == 2
        assert (await check.reserve(verdict, clock.now())).made
        held = await ledger.reservations(source.name)
        assert [(r.placement, r.node) for r in held] == sorted(verdict.targets)
        assert {r.expires_at for r in held} == {clock.now() + timedelta(minutes=5)}
        await check_ledger(ledger, ids)
        again = await check.judge_nodes([source.name])
        assert again[source.name].targets == verdict.targets  # its own room is its own
        other = small[1]
        other_node = cluster.claims[other].node
        assert other_node is not None
        (theirs,) = (await check.judge_nodes([other_node.name])).values()
        assert not theirs.fits  # the room small-1's drain holds is not small-2's to plan with
        taken = await ledger.admit(AdmitRequest("team", verdict.moves[0].target, SIZE))
        assert taken.denial is not None  # reserved room is taken room
        assert await check.release(source.name) == len(held)
        assert await ledger.reservations() == []
        taken = await ledger.admit(AdmitRequest("team", verdict.moves[0].target, SIZE))
        assert taken.placement is not None
        refused = await check.reserve(verdict, clock.now())  # a stale plan: room taken since
        assert not refused.made and await ledger.reservations() == []
        await check_ledger(ledger, {*ids, taken.placement.id})
