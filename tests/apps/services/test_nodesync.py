"""NodeSync over the in-memory ledger and the fake cluster: join, cordon, relocate, leave."""

from __future__ import annotations

from datetime import timedelta
from random import Random

from fleetgate.adapters import plugins
from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.fakecluster.cluster import FakeCluster
from fleetgate.apps.services import nodesync as svc
from fleetgate.apps.services.nodesync import NodeSync
from fleetgate.apps.services.placement import PlacementService
from fleetgate.apps.services.relocation import PlanReader
from fleetgate.domain import nodesync as rules
from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.model import NodeSpec, PlacementRequest
from tests.fakes.ledger import InMemoryLedger
from tests.invariants import check_ledger

VM = Resources(2, 2048, 10)


def fake(clock: VirtualClock) -> FakeCluster:
    cluster: FakeCluster = plugins.make_cluster(
        plugins.plugin_manager(allow={"fake"}), "fake", {}, clock
    )
    cluster.add_pool("p", expire_after="14d", termination_grace_period="1h", drain_time="5m")
    return cluster


def parts(
    ledger: InMemoryLedger, clock: VirtualClock
) -> tuple[FakeCluster, NodeSync, PlacementService]:
    cluster = fake(clock)
    sink = ledger.event_sink()
    sync = NodeSync(ledger, cluster, clock, sink, DemandPolicy())
    return cluster, sync, PlacementService(ledger, clock, sink, DemandPolicy(), Random(2))


async def place(service: PlacementService, node: str, n: int = 1) -> list[str]:
    ids = []
    for _ in range(n):
        out = await service.place(PlacementRequest("team", VM, node=node))
        assert out.placement is not None
        ids.append(out.placement.id)
    return ids


async def test_ready_nodes_join_with_their_capacity_and_launching_ones_wait(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    cluster, sync, _ = parts(ledger, clock)
    cluster.add_node("p", "a")
    cluster.add_node("p", "b", ready=False)
    report = await sync.sync()
    assert report.joined == ["a"]
    a = await ledger.node("a")
    assert a is not None and a.pool == "p" and a.schedulable
    assert a.capacity == Capacity(4, 16384, rules.DEFAULT_DISK_GB)
    assert a.labels[rules.SOURCE] == "true"
    cluster.set_ready("b", True)
    assert (await sync.sync()).joined == ["b"]
    again = await sync.sync()
    assert not again.changed
    assert [r.event.kind for r in await ledger.events(subject="b")] == [svc.NODE_JOINED]


async def test_the_ledger_follows_the_clusters_cordon_but_keeps_an_operators(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    cluster, sync, _ = parts(ledger, clock)
    cluster.add_node("p", "a")
    cluster.add_node("p", "b")
    await sync.sync()
    await cluster.set_unschedulable("a", True)
    assert (await sync.sync()).cordoned == ["a"]
    a = await ledger.node("a")
    assert a is not None and not a.schedulable and a.labels[rules.CORDONED] == "true"
    await cluster.set_unschedulable("a", False)
    assert (await sync.sync()).uncordoned == ["a"]
    a = await ledger.node("a")
    assert a is not None and a.schedulable and rules.CORDONED not in a.labels
    await ledger.cordon("b")  # the operator's, through the API
    assert not (await sync.sync()).changed
    b = await ledger.node("b")
    assert b is not None and not b.schedulable


async def test_a_draining_nodes_placements_move_by_its_plan_exactly_once(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    cluster, sync, service = parts(ledger, clock)
    for name in ("a", "b"):
        cluster.add_node("p", name)
    await sync.sync()
    ids = set(await place(service, "a", 4)) | set(await place(service, "b", 1))
    await cluster.delete_claim("a")
    report = await sync.sync()
    assert report.cordoned == ["a"] and report.moved == 4 and report.stranded == 0
    await check_ledger(ledger, ids)
    assert [p.node for p in await ledger.placements()] == ["b"] * 5
    moved = await ledger.events(kind=svc.REDIRECTED)
    assert len(moved) == 4 and {e.event.data["target_node"] for e in moved} == {"b"}
    assert all(e.event.data["node"] == "a" for e in moved)
    # The drain ends: the node leaves the cluster, and then the ledger.
    cluster.advance_to(clock.now() + timedelta(minutes=6))
    assert (await sync.sync()).left == ["a"]
    assert await ledger.node("a") is None
    await check_ledger(ledger, ids)


async def test_a_placement_nowhere_fits_stays_counted_until_a_new_node_takes_it(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    cluster, sync, service = parts(ledger, clock)
    cluster.add_node("p", "a")
    cluster.add_node("p", "b")
    await sync.sync()
    ids = set(await place(service, "a", 6)) | set(await place(service, "b", 5))  # b: 10 of 12
    await cluster.delete_claim("a")
    report = await sync.sync()
    assert (report.moved, report.stranded) == (1, 5)
    await check_ledger(ledger, ids)
    failed = await ledger.events(kind=svc.RESCHEDULE_FAILED)
    assert failed and failed[0].event.data["candidates"] == ["b"]
    # The claim is removed from the cluster; the ledger keeps the node while it holds anything.
    cluster.advance_to(clock.now() + timedelta(minutes=6))
    assert (await sync.sync()).left == []
    assert await ledger.node("a") is not None
    cluster.add_node("p", "c")  # a replacement becomes Ready
    report = await sync.sync()
    assert report.joined == ["c"] and report.moved == 5 and report.left == ["a"], report
    await check_ledger(ledger, ids)


async def test_a_placement_released_during_a_relocation_is_simply_gone(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    cluster, sync, service = parts(ledger, clock)
    cluster.add_node("p", "a")
    cluster.add_node("p", "b")
    await sync.sync()
    kept, (gone,) = await place(service, "a", 1), await place(service, "a")
    plan = await PlanReader(ledger, sync.policy).plan("a")
    assert {m.placement for m in plan.moves} == {*kept, gone}
    await service.release("team", gone)  # after the plan was read, before it is carried out
    assert await sync.carry_out("a", plan) == (1, 0)
    await check_ledger(ledger, set(kept))
    assert (await ledger.placement(kept[0])) is not None


async def test_a_planned_move_whose_room_was_taken_since_leaves_the_placement_counted(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    """The plan is read, then an admission takes its room before the move: the guarded move
    refuses (never an over-commit), the placement stays where it is, and the next sync plans
    again from what the ledger holds then."""
    cluster, sync, service = parts(ledger, clock)
    cluster.add_node("p", "a")
    cluster.add_node("p", "b")
    await sync.sync()
    ids = set(await place(service, "a", 2))
    plan = await PlanReader(ledger, sync.policy).plan("a")
    assert plan.fits and {m.target for m in plan.moves} == {"b"}
    ids |= set(await place(service, "b", 5))  # b: 10 of 12 vCPU, room for one more only
    await ledger.cordon("a")
    assert await sync.carry_out("a", plan) == (1, 1)
    await check_ledger(ledger, ids)
    refused = await ledger.events(kind=svc.RESCHEDULE_REFUSED)
    failed = await ledger.events(kind=svc.RESCHEDULE_FAILED)
    assert len(refused) == 1 and refused[0].event.data["node"] == "b"
    assert len(failed) == 1 and failed[0].event.data["candidates"] == ["b"]
    assert sorted(p.node for p in await ledger.placements() if p.id in ids) == ["a"] + ["b"] * 6


async def test_operator_nodes_are_not_touched(ledger: InMemoryLedger, clock: VirtualClock) -> None:
    cluster, sync, service = parts(ledger, clock)
    await ledger.add_node(NodeSpec("manual", Capacity(2, 4096, 50)))
    cluster.add_node("p", "a")
    await sync.sync()
    ids = set(await place(service, "manual"))
    assert not (await sync.sync()).changed
    manual = await ledger.node("manual")
    assert manual is not None and manual.schedulable and rules.SOURCE not in manual.labels
    await check_ledger(ledger, ids)
