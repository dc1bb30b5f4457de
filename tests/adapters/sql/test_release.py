"""Release and move: idempotent, floored, decayed demand credited, claims and overage returned."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa

from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.adapters.sql.schema import claims
from fleetgate.domain.capacity.denials import Stage
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.errors import NodeNotFound, PlacementNotFound
from fleetgate.domain.capacity.model import AdmitRequest, MoveRequest, NodeMetrics, NodeSpec
from tests.adapters.sql.seed import claim_used, insert_claim, set_cluster, set_node

SIZE = Resources(2, 2048, 20)


async def two_nodes(ledger: SqlLedger) -> None:
    await ledger.add_node(NodeSpec("a", Capacity(4, 8192, 100)))
    await ledger.add_node(NodeSpec("b", Capacity(4, 8192, 100)))


async def admit(ledger: SqlLedger, node: str = "a", **kw: object) -> str:
    request = AdmitRequest("team", node, SIZE, demand=1.2, **kw)  # type: ignore[arg-type]
    admission = await ledger.admit(request)
    assert admission.placement is not None
    return admission.placement.id


async def test_release_returns_everything_and_is_idempotent(ledger: SqlLedger) -> None:
    await two_nodes(ledger)
    pid = await admit(ledger)
    first = await ledger.release(pid)
    assert first.released and not first.clamped and first.placement is not None
    assert first.demand_credit == pytest.approx(1.2)  # released at once: nothing decayed
    node = await ledger.node("a")
    assert node is not None and node.used == Resources() and node.expected_demand == 0.0
    assert (await ledger.cluster()).unclaimed_used == Resources()
    again = await ledger.release(pid)
    assert not again.released and again.placement is None
    assert await ledger.placement(pid) is None


async def test_release_credits_only_the_decayed_demand(
    ledger: SqlLedger, clock: VirtualClock
) -> None:
    await two_nodes(ledger)
    pid = await admit(ledger)
    await admit(ledger)
    clock.advance(timedelta(seconds=450))  # 3/4 of the 600 s window: 0.3 of 1.2 remains
    result = await ledger.release(pid)
    assert result.demand_credit == pytest.approx(0.3)
    node = await ledger.node("a")
    assert node is not None and node.expected_demand == pytest.approx(2.4 - 0.3)


async def test_a_release_after_the_decay_window_credits_nothing(
    ledger: SqlLedger, clock: VirtualClock
) -> None:
    await two_nodes(ledger)
    pid = await admit(ledger)
    clock.advance(timedelta(minutes=11))
    assert (await ledger.release(pid)).demand_credit == 0.0
    assert (await ledger.node("a")).expected_demand == pytest.approx(1.2)  # type: ignore[union-attr]


async def test_release_is_floored_and_says_so(ledger: SqlLedger) -> None:
    await two_nodes(ledger)
    pid = await admit(ledger)
    await set_node(ledger, "a", used_cpus=1, expected_demand=0.5)  # drift: less than charged
    result = await ledger.release(pid)
    assert result.released and result.clamped
    node = await ledger.node("a")
    assert node is not None and node.used == Resources() and node.expected_demand == 0.0


async def test_release_in_another_namespace_is_absent(ledger: SqlLedger) -> None:
    await two_nodes(ledger)
    pid = await admit(ledger)
    assert not (await ledger.release(pid, namespace="other")).released
    assert (await ledger.release(pid, namespace="team")).released


async def test_release_credits_the_claim_it_charged(ledger: SqlLedger) -> None:
    await two_nodes(ledger)
    claim = await insert_claim(ledger, "team", Resources(3, 10_000, 100))
    first, second = await admit(ledger), await admit(ledger)  # 4 cpus on a 3-cpu claim: 1 over
    assert await claim_used(ledger, claim) == Resources(4, 4096, 40)
    assert (await ledger.cluster()).unclaimed_used == Resources(1, 0, 0)
    await ledger.release(second)
    assert await claim_used(ledger, claim) == Resources(2, 2048, 20)
    assert (await ledger.cluster()).unclaimed_used == Resources()  # the overage went with it
    await ledger.release(first)
    assert await claim_used(ledger, claim) == Resources()


async def test_a_placement_of_a_gone_claim_is_credited_to_the_cluster(ledger: SqlLedger) -> None:
    await two_nodes(ledger)
    await insert_claim(ledger, "team", Resources(10, 10_000, 100), claim_id="c-old")
    pid = await admit(ledger)
    # The claim lifecycle (deletion/expiry) hands its usage to the cluster; simulate that here.
    async with ledger.store.engine.begin() as conn:
        await conn.execute(sa.delete(claims))
    await set_cluster(ledger, unclaimed_used_cpus=2, unclaimed_used_memory_mb=2048,
                      unclaimed_used_disk_gb=20)  # fmt: skip
    assert (await ledger.release(pid)).released
    assert (await ledger.cluster()).unclaimed_used == Resources()


async def test_move_charges_the_target_and_credits_the_source(
    ledger: SqlLedger, clock: VirtualClock
) -> None:
    await two_nodes(ledger)
    pid = await admit(ledger)
    clock.advance(timedelta(seconds=300))
    moved = await ledger.move(MoveRequest(pid, "b", demand=1.2, target_load=0.75))
    assert moved.placement is not None and moved.placement.node == "b"
    assert moved.placement.admitted_at == clock.now()  # the workload starts afresh there
    a, b = await ledger.node("a"), await ledger.node("b")
    assert a is not None and a.used == Resources() and a.expected_demand == pytest.approx(0.6)
    assert b is not None and b.used == SIZE and b.expected_demand == pytest.approx(1.2)
    assert (await ledger.cluster()).unclaimed_used == SIZE  # the namespace side never moves


async def test_a_refused_move_changes_nothing(ledger: SqlLedger) -> None:
    await two_nodes(ledger)
    pid = await admit(ledger)
    await ledger.publish_metrics("b", NodeMetrics(cpu_load_1=9.0, cpu_schedulable=4))
    before = (await ledger.node("a"), await ledger.node("b"), await ledger.placement(pid))
    moved = await ledger.move(MoveRequest(pid, "b", demand=1.2, target_load=0.75))
    assert moved.denial is not None and moved.denial.demand_only
    assert moved.denial.stage is Stage.NODE
    after = (await ledger.node("a"), await ledger.node("b"), await ledger.placement(pid))
    assert after == before


async def test_move_errors(ledger: SqlLedger) -> None:
    await two_nodes(ledger)
    pid = await admit(ledger)
    with pytest.raises(PlacementNotFound):
        await ledger.move(MoveRequest("nope", "b"))
    with pytest.raises(PlacementNotFound):
        await ledger.move(MoveRequest(pid, "b", namespace="other"))
    with pytest.raises(NodeNotFound):
        await ledger.move(MoveRequest(pid, "zz"))
    same = await ledger.move(MoveRequest(pid, "a"))
    assert same.placement is not None and same.placement.node == "a"
    assert (await ledger.node("a")).used == SIZE  # type: ignore[union-attr]
