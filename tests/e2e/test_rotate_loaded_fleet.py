"""Rotate every node of a loaded fleet: the real controller on the fake cluster, the real ledger.

Two pools of three nodes carry placements at ~70% of their vCPU limits, one namespace of three
drawing on a claim. The rotation controller replaces every original node make-before-break; the
node sync follows the cluster into the ledger. After every step (each controller round, each
sync) the ledger must hold every placement exactly once, each node's counters must equal the
sum of its placements and stay within its limits, and no node the cluster is taking away may
still be schedulable in the ledger.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from random import Random

import pytest
from prometheus_client import CollectorRegistry

from fleetgate.adapters import plugins
from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.fakecluster.cluster import FakeCluster
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.apps.controller.metrics import RotationMetrics
from fleetgate.apps.controller.shell import RotationController
from fleetgate.apps.services.nodesync import NodeSync
from fleetgate.apps.services.placement import PlacementService
from fleetgate.apps.services.relocation import RelocationCheck
from fleetgate.domain.capacity.claims import ClaimRequest
from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.capacity.dimensions import Resources
from fleetgate.domain.capacity.model import NodeMetrics, PlacementRequest
from fleetgate.domain.rotation.labelselector import LabelSelector
from fleetgate.domain.rotation.policy import RotationPolicy, Surge
from fleetgate.domain.rotation.windows import MaintenanceWindow
from tests.conftest import Backend
from tests.invariants import check_ledger
from tests.ledgers import open_ledger

T0 = datetime(2024, 1, 1, tzinfo=UTC)
POOLS = ("general", "batch")
WORKLOAD = {"cpu": 3_000}  # keeps a placeholder off the neighbours: every surge is a new node
SIZES = (Resources(2, 2048, 10), Resources(1, 4096, 20), Resources(4, 1024, 5))
ALWAYS = MaintenanceWindow(
    "UTC", ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"), "00:00", "24:00"
)


# Every node older than an hour is due: the whole fleet, not its replacements, in this test.
POLICY = RotationPolicy(
    name="everything",
    node_pool_selector=LabelSelector(),
    age_threshold=timedelta(hours=1),
    maintenance_windows=(ALWAYS,),
    surge=Surge(cooldown_after=timedelta(minutes=2)),
)


async def load(service: PlacementService, ledger: SqlLedger) -> set[str]:
    """Place until every node is at ~70% of its vCPU limit (busy metrics make the walk waive)."""
    for node in await ledger.nodes():
        await ledger.publish_metrics(node.name, NodeMetrics(cpu_load_1=2.5, cpu_schedulable=4))
    total = sum(n.limits.cpus for n in await ledger.nodes())
    ids: set[str] = set()
    placed = 0
    i = 0
    while placed < 0.7 * total:
        size = SIZES[i % len(SIZES)]
        out = await service.place(PlacementRequest(f"team-{i % 3}", size))
        assert out.placement is not None, out.denials
        ids.add(out.placement.id)
        placed += size.cpus
        i += 1
    return ids


async def check_claim(ledger: SqlLedger) -> None:
    """A move changes nodes, never the namespace side: the claim still holds exactly team-0's."""
    (claim,) = await ledger.claims()
    held = Resources()
    for p in await ledger.placements("team-0"):
        held = held.plus(p.resources)
    assert claim.used == held


async def check_cordons(ledger: SqlLedger, cluster: FakeCluster) -> None:
    """No node the cluster is draining, has cordoned or has lost takes placements in the ledger."""
    live = {c.node.name: c for c in cluster.claims.values() if c.node is not None}
    for node in await ledger.nodes():
        claim = live.get(node.name)
        leaving = (
            claim is None
            or claim.deleting_at is not None
            or claim.node is None
            or claim.node.unschedulable
        )
        assert not (leaving and node.schedulable), f"{node.name} is leaving but schedulable"


@pytest.mark.parametrize("gate", [False, True], ids=["blind", "ledger-gate"])
async def test_every_node_of_a_loaded_fleet_rotates_without_losing_a_placement(
    backend: Backend, gate: bool
) -> None:
    """With the ledger gate on (issue 33) every node's placements fit: it rotates as before."""
    clock = VirtualClock(T0)
    cluster: FakeCluster = plugins.make_cluster(
        plugins.plugin_manager(allow={"fake"}), "fake", {}, clock
    )
    for pool in POOLS:
        cluster.add_pool(
            pool,
            expire_after="14d",
            termination_grace_period="1h",
            provisioning_delay="2m",
            drain_time="5m",
        )
        for _ in range(3):
            cluster.add_node(pool, created_at=T0 - timedelta(hours=2), workload=WORKLOAD)
    originals = set(cluster.claims)
    async with open_ledger(backend, clock) as ledger:
        sink = ledger.event_sink()
        sync = NodeSync(ledger, cluster, clock, sink, DemandPolicy())
        service = PlacementService(ledger, clock, sink, DemandPolicy(), Random(4))
        assert len((await sync.sync()).joined) == 6
        created = await ledger.create_claim(
            ClaimRequest("team-0", Resources(24, 24576, 240), 86400)
        )
        assert created.ok
        ids = await load(service, ledger)
        await check_ledger(ledger, ids)
        await check_claim(ledger)

        async def policies() -> list[RotationPolicy]:
            return [POLICY]

        controller = RotationController(
            cluster,
            policies,
            clock,
            sink,
            RotationMetrics(CollectorRegistry()),
            relocation=RelocationCheck(ledger, DemandPolicy()) if gate else None,
        )
        moved = 0
        end = T0 + timedelta(hours=6)
        while originals & set(cluster.claims):
            assert clock.now() < end, (
                f"not rotated by {end}: {sorted(originals & set(cluster.claims))}"
            )
            await controller.run_due()
            await check_ledger(ledger, ids)
            report = await sync.sync()
            moved += report.moved
            assert report.stranded == 0, "a surge node must always have room for its old node"
            await check_ledger(ledger, ids)
            await check_claim(ledger)
            await check_cordons(ledger, cluster)
            due = [t for t in (controller.next_due(), cluster.next_event_at()) if t is not None]
            cluster.advance_to(min(due))

        # Every original node has left the cluster and, once empty, the ledger.
        await sync.sync()
        await check_ledger(ledger, ids)
        names = {n.name for n in await ledger.nodes()}
        assert not names & originals
        assert names == {c for c in cluster.claims if cluster.claims[c].ready}
        assert moved >= len(ids), "every placement was on an original node and had to move"
        assert not cluster.breaches
