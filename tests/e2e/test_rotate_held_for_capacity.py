"""Gate 9 end to end: a node whose ledger placements would have nowhere to go is not drained.

Both tests run the real controller and node sync on the fake cluster and the real ledger; after
every round and sync every placement exists exactly once, the counters agree, and no placement
is ever stranded.


"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from random import Random

from prometheus_client import CollectorRegistry

from fleetgate.adapters import plugins
from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.fakecluster.cluster import FakeCluster
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.apps.controller.metrics import RotationMetrics
from fleetgate.apps.controller.shell import RotationController
from fleetgate.apps.services.nodesync import NodeSync
from fleetgate.apps.services.relocation import RelocationCheck
from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.capacity.dimensions import Resources
from fleetgate.domain.capacity.model import AdmitRequest
from fleetgate.domain.rotation.gates import GateReason
from fleetgate.domain.rotation.ledger_gate import HELD, LedgerBlocked
from fleetgate.domain.rotation.policy import RotationPolicy
from tests.conftest import Backend
from tests.e2e.test_rotate_loaded_fleet import POLICY  # every node older than 1h, any time
from tests.invariants import check_ledger
from tests.ledgers import open_ledger

T0 = datetime(2024, 1, 1, tzinfo=UTC)
GIB = 2**30 * 1_000
BIG = {"cpu": 8_000, "memory": 32 * GIB, "pods": 110_000}
SMALL = {"cpu": 4_000, "memory": 16 * GIB, "pods": 110_000}
SIZE = Resources(4, 1024, 5)


def rig(
    clock: VirtualClock, young: bool, cluster: FakeCluster | None = None
) -> tuple[FakeCluster, str, list[str]]:
    """One pool launching big nodes: ``big`` (24 vCPU limit) and two small ones (12), oldest
    first; ``young``: the small ones are too young to rotate yet. On ``cluster`` if given (an
    application's own), else on a new fake cluster."""
    now = clock.now()
    if cluster is None:
        cluster = plugins.make_cluster(plugins.plugin_manager(allow={"fake"}), "fake", {}, clock)
    cluster.add_pool(
        "general",
        expire_after="14d",
        termination_grace_period="1h",
        provisioning_delay="2m",
        drain_time="5m",
        node_allocatable=BIG,
    )
    # Workloads leave 1 vCPU free on every node: each placeholder needs a new node.
    big = cluster.add_node(
        "general", created_at=now - timedelta(hours=3), allocatable=BIG, workload={"cpu": 7_000}
    )
    small = [
        cluster.add_node(
            "general",
            created_at=now if young else now - timedelta(hours=2),
            allocatable=SMALL,
            workload={"cpu": 3_000},
        )
        for _ in range(2)
    ]
    return cluster, big, small


async def load_placements(
    ledger: SqlLedger, cluster: FakeCluster, big: str, small: list[str]
) -> set[str]:
    """20 vCPU on ``big``, the small nodes full (12 each)."""
    ids: set[str] = set()
    for claim, count in [(big, 5), *((s, 3) for s in small)]:
        node = cluster.claims[claim].node
        assert node is not None
        for _ in range(count):
            made = await ledger.admit(AdmitRequest("team", node.name, SIZE))
            assert made.placement is not None, made.denial
            ids.add(made.placement.id)
    await check_ledger(ledger, ids)
    return ids


async def _policies() -> list[RotationPolicy]:
    return [POLICY]


def _controller(
    cluster: FakeCluster, ledger: SqlLedger, clock: VirtualClock, registry: CollectorRegistry
) -> RotationController:
    return RotationController(
        cluster,
        _policies,
        clock,
        ledger.event_sink(),
        RotationMetrics(registry),
        relocation=RelocationCheck(ledger, DemandPolicy()),
    )


def _held(registry: CollectorRegistry) -> float | None:
    return registry.get_sample_value("fleetgate_rotation_ledger_held", {"nodepool": "general"})


async def test_a_node_without_room_is_skipped_for_one_that_fits(backend: Backend) -> None:
    """``big`` is the oldest but its 20 vCPU would not fit (the surge is judged as small as the
    pool's smallest node, 12): a small node, whose 12 fit, is started first; its replacement,
    launched big, brings the room, and ``big`` rotates in its turn."""
    clock = VirtualClock(T0)
    cluster, big, small = rig(clock, young=False)
    originals = {big, *small}
    async with open_ledger(backend, clock) as ledger:
        sync = NodeSync(ledger, cluster, clock, ledger.event_sink(), DemandPolicy(), Random(3))
        assert len((await sync.sync()).joined) == 3
        ids = await load_placements(ledger, cluster, big, small)
        controller = _controller(cluster, ledger, clock, CollectorRegistry())
        started: list[str] = []
        end = T0 + timedelta(hours=8)
        while originals & set(cluster.claims):
            assert clock.now() < end, f"not rotated: {sorted(originals & set(cluster.claims))}"
            for result in await controller.run_due():
                assert result.step is not None
                if result.step.started:
                    started.append(result.step.started)
            report = await sync.sync()
            assert report.stranded == 0, "the gate let a node drain whose placements had no room"
            await check_ledger(ledger, ids)
            due = [t for t in (controller.next_due(), cluster.next_event_at()) if t is not None]
            cluster.advance_to(min(due))
        assert started[0] in small and sorted(started) == sorted(originals), started
        held = await ledger.events(kind=HELD)
        assert held and all(e.event.subject == big for e in held)
        await sync.sync()
        await check_ledger(ledger, ids)


async def test_a_node_without_room_is_held_until_a_node_is_added_then_rotates(
    backend: Backend,
) -> None:
    """Only ``big`` is old enough and its placements would not fit: the pool is held with the
    gate (status, metric, event naming the ways out) pass after pass, until an operator adds a
    node; then it rotates with nothing stranded and the gate clears by itself."""
    clock = VirtualClock(T0)
    cluster, big, small = rig(clock, young=True)
    big_node = cluster.claims[big].node
    assert big_node is not None
    async with open_ledger(backend, clock) as ledger:
        sync = NodeSync(ledger, cluster, clock, ledger.event_sink(), DemandPolicy(), Random(3))
        await sync.sync()
        ids = await load_placements(ledger, cluster, big, small)
        registry = CollectorRegistry()
        controller = _controller(cluster, ledger, clock, registry)
        for _ in range(3):  # held pass after pass, the cluster untouched
            (result,) = await controller.run_due()
            assert result.step is not None and result.step.started is None
            blocked = result.step.report.blocked
            assert isinstance(blocked, LedgerBlocked), result.step.report.reason
            assert blocked.reason is GateReason.LEDGER_CAPACITY and blocked.nodeclaim == big
            assert blocked.verdict is not None
            assert blocked.verdict.shortfall() == Resources(8, 0, 0)
            assert _held(registry) == 1
            missing = {"nodepool": "general"}
            cpus = registry.get_sample_value("fleetgate_rotation_ledger_missing_cpus", missing)
            memory = {**missing, "resource": "memory"}
            held_bytes = registry.get_sample_value(
                "fleetgate_rotation_ledger_missing_bytes", memory
            )
            assert (cpus, held_bytes) == (8, 0)
            assert (await sync.sync()).stranded == 0
            next_due = controller.next_due()
            assert next_due is not None
            cluster.advance_to(next_due)
        (event,) = await ledger.events(kind=HELD)  # once: the same shortfall is not repeated
        message = event.event.data["message"]
        assert "cpus 8" in message and "shrink a capacity claim" in message, message
        assert "add a node" in message
        # The operator adds a node (young: not itself a candidate); the sync brings it in.
        cluster.add_node("general", allocatable=SMALL, workload={"cpu": 3_000})
        await sync.sync()
        end = clock.now() + timedelta(hours=2)
        while big in cluster.claims:
            assert clock.now() < end, "big was not rotated once the room appeared"
            await controller.run_due()
            report = await sync.sync()
            assert report.stranded == 0
            await check_ledger(ledger, ids)
            due = [t for t in (controller.next_due(), cluster.next_event_at()) if t is not None]
            cluster.advance_to(min(due))
        await sync.sync()
        await check_ledger(ledger, ids)
        assert big_node.name not in {n.name for n in await ledger.nodes()}
        assert _held(registry) == 0
