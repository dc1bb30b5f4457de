"""The ledger read behind gate 9: verdicts per pool node, and the status that reports them."""

from __future__ import annotations

from datetime import UTC, datetime
from random import Random

from fleetgate.adapters.clock import VirtualClock
from fleetgate.apps.api.schemas.status import PoolRotationBody
from fleetgate.apps.services.nodesync import NodeSync
from fleetgate.apps.services.relocation import RelocationCheck
from fleetgate.apps.services.rotationstatus import RotationStatus
from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.capacity.dimensions import Resources
from fleetgate.domain.rotation.annotations import ACTIVE_ROTATION
from fleetgate.domain.rotation.policy import RotationPolicy
from tests.conftest import Backend
from tests.e2e.test_rotate_held_for_capacity import load_placements, rig
from tests.e2e.test_rotate_loaded_fleet import POLICY
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
