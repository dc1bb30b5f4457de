"""The ledger read behind gate 9: verdicts per pool node, and the status that reports them."""

from __future__ import annotations

from datetime import UTC, datetime
from random import Random

import pytest

from fleetgate.adapters.clock import VirtualClock
from fleetgate.apps.api.schemas.status import PoolRotationBody
from fleetgate.apps.services.nodesync import NodeSync
from fleetgate.apps.services.relocation import RelocationCheck
from fleetgate.apps.services.rotationstatus import RotationStatus
from fleetgate.domain.capacity.claims import ClaimRequest
from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.model import AdmitRequest, NodeMetrics, NodeSpec
from fleetgate.domain.capacity.relocation import Snapshot, judge
from fleetgate.domain.rotation.annotations import ACTIVE_ROTATION
from fleetgate.domain.rotation.policy import RotationPolicy
from tests.conftest import Backend
from tests.e2e.test_rotate_held_for_capacity import load_placements, rig
from tests.e2e.test_rotate_loaded_fleet import POLICY
from tests.invariants import check_ledger
from tests.ledgers import open_ledger

T0 = datetime(2024, 1, 1, tzinfo=UTC)


async def _policies() -> list[RotationPolicy]:
    return [POLICY]


async def test_each_loaded_node_is_judged_and_the_status_reports_the_hold(
    backend: Backend,
) -> None:
    clock = VirtualClock(T0)
    cluster, big, small = rig(clock, young=True)
    async with open_ledger(backend, clock) as ledger:
        sync = NodeSync(ledger, cluster, clock, ledger.event_sink(), DemandPolicy(), Random(3))
        await sync.sync()
        check = RelocationCheck(ledger, DemandPolicy())
        obs = await cluster.observe("general")
        assert obs is not None
        assert await check.verdicts(obs) == {}  # nothing placed yet: nothing to judge
        await load_placements(ledger, cluster, big, small)
        verdicts = await check.verdicts(obs)
        assert verdicts is not None
        big_node = cluster.claims[big].node
        assert big_node is not None
        assert set(verdicts) == {n.name for n in obs.nodes}
        assert not verdicts[big_node.name].fits
        assert verdicts[big_node.name].shortfall() == Resources(8, 0, 0)
        assert all(v.fits for name, v in verdicts.items() if name != big_node.name)
        # Only a start is gated: with a rotation in flight the ledger is not read at all.
        reads = check.reads
        anchored = obs.with_changes({**obs.annotations, ACTIVE_ROTATION: big}, {}, {})
        assert await check.verdicts(anchored) is None and check.reads == reads

        status = RotationStatus(cluster, _policies, clock, relocation=check)
        (pool,) = await status.pools()
        body = PoolRotationBody.of(pool)
        assert body.reason == "ledgerCapacity" and body.gate_until is None
        assert body.ledger_hold is not None and body.ledger_hold["nodeclaim"] == big
        assert body.ledger_hold["missing"] == {"cpus": 8, "memory_mb": 0, "disk_gb": 0}
        (blind,) = await RotationStatus(cluster, _policies, clock).pools()
        assert PoolRotationBody.of(blind).ledger_hold is None


@pytest.mark.parametrize("enforcement", ["advisory", "hard"])
@pytest.mark.parametrize("seed", range(4))
async def test_the_judgement_is_the_relocation_the_node_sync_then_makes(
    backend: Backend, enforcement: str, seed: int
) -> None:
    """Judged without a surge (nothing in the snapshot but real nodes), the verdict names the
    very nodes the real relocation moves each placement to, and the very placements it leaves
    behind, in both claim enforcement modes (a move never touches the claim side)."""
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
        held = await ledger.placements(node=source)
        snapshot = Snapshot(
            source, tuple(await ledger.nodes()), await ledger.cluster(), tuple(held)
        )
        verdict = judge(snapshot, DemandPolicy(), Random(seed), surge=False)
        await ledger.cordon(source)
        sync = NodeSync(ledger, None, clock, ledger.event_sink(), DemandPolicy(), Random(seed))  # type: ignore[arg-type]
        moved, stranded = await sync.relocate(source)
        assert (moved, stranded) == (len(verdict.targets), len(verdict.stranded))
        now = {p.id: p.node for p in await ledger.placements()}
        assert {pid: now[pid] for pid, _ in verdict.targets} == dict(verdict.targets)
        assert all(now[pid] == source for pid in verdict.stranded)
        await check_ledger(ledger, set(now))
