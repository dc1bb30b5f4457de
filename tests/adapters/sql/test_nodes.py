"""Node lifecycle in the ledger: limits from overcommit, cluster totals, removal, cordon."""

from __future__ import annotations

from datetime import timedelta

import pytest

from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.errors import NodeBusy, NodeExists, NodeNotFound
from fleetgate.domain.capacity.model import AdmitRequest, NodeMetrics, NodeSpec
from tests.conftest import Backend
from tests.ledgers import START, open_ledger


def spec(name: str, threads: int = 4, memory_mb: int = 8192, disk_gb: int = 100) -> NodeSpec:
    return NodeSpec(
        name, Capacity(threads, memory_mb, disk_gb), pool="general", labels={"zone": "a"}
    )


async def test_a_new_node_gets_limits_from_its_capacity_and_the_default_ratios(
    ledger: SqlLedger,
) -> None:
    node = await ledger.add_node(spec("n1", threads=14, memory_mb=64243, disk_gb=766))
    assert node.limits == Resources(42, 64243, 766)
    assert node.used == Resources()
    assert node.schedulable and node.expected_demand == 0.0
    assert node.pool == "general" and node.labels == {"zone": "a"}
    assert node.updated_at == START


async def test_configured_ratios_scale_the_limits_and_round_down(backend: Backend) -> None:
    async with open_ledger(
        backend, cpu_overcommit=2.5, memory_overcommit=1.25, disk_overcommit=0.5
    ) as ledger:
        node = await ledger.add_node(spec("n1", threads=3, memory_mb=1001, disk_gb=101))
    assert node.limits == Resources(7, 1251, 50)


async def test_cluster_totals_follow_every_node_change(ledger: SqlLedger) -> None:
    await ledger.add_node(spec("a", threads=4, memory_mb=1000, disk_gb=10))
    await ledger.add_node(spec("b", threads=2, memory_mb=500, disk_gb=5))
    assert (await ledger.cluster()).total == Resources(18, 1500, 15)
    await ledger.update_node(spec("b", threads=8, memory_mb=500, disk_gb=5))
    assert (await ledger.cluster()).total == Resources(36, 1500, 15)
    await ledger.remove_node("a")
    assert (await ledger.cluster()).total == Resources(24, 500, 5)
    assert [n.name for n in await ledger.nodes()] == ["b"]


async def test_adding_a_node_twice_is_refused(ledger: SqlLedger) -> None:
    await ledger.add_node(spec("a"))
    with pytest.raises(NodeExists, match="'a'"):
        await ledger.add_node(spec("a"))
    assert (await ledger.cluster()).total.cpus == 12


async def test_unknown_nodes_are_reported(ledger: SqlLedger) -> None:
    with pytest.raises(NodeNotFound):
        await ledger.update_node(spec("ghost"))
    with pytest.raises(NodeNotFound):
        await ledger.remove_node("ghost")
    with pytest.raises(NodeNotFound):
        await ledger.cordon("ghost")
    with pytest.raises(NodeNotFound):
        await ledger.publish_metrics("ghost", NodeMetrics(1.0, 4))
    assert await ledger.node("ghost") is None


async def test_a_node_holding_placements_cannot_be_removed(ledger: SqlLedger) -> None:
    await ledger.add_node(spec("a"))
    admitted = await ledger.admit(AdmitRequest("team", "a", Resources(1, 1, 1)))
    assert admitted.placement is not None
    with pytest.raises(NodeBusy, match="1 placement"):
        await ledger.remove_node("a")
    assert (await ledger.cluster()).total.cpus == 12
    await ledger.release(admitted.placement.id)
    await ledger.remove_node("a")
    assert await ledger.nodes() == []


async def test_updating_a_node_keeps_its_counters(ledger: SqlLedger) -> None:
    await ledger.add_node(spec("a", threads=4))
    await ledger.admit(AdmitRequest("team", "a", Resources(10, 100, 10), demand=6.0))
    node = await ledger.update_node(spec("a", threads=2))
    assert node.limits.cpus == 6
    assert node.used == Resources(10, 100, 10)  # now over its limit: it admits nothing more
    assert node.expected_demand == 6.0


async def test_metrics_are_recorded_with_their_time(ledger: SqlLedger, clock: VirtualClock) -> None:
    await ledger.add_node(spec("a"))
    clock.advance(timedelta(seconds=30))
    node = await ledger.publish_metrics("a", NodeMetrics(cpu_load_1=1.5, cpu_schedulable=3))
    assert node.metrics == NodeMetrics(1.5, 3)
    assert node.metrics_at == START + timedelta(seconds=30)
    node = await ledger.publish_metrics("a", NodeMetrics())
    assert node.metrics == NodeMetrics(None, None)


async def test_cordon_and_uncordon_flip_schedulable(ledger: SqlLedger) -> None:
    await ledger.add_node(spec("a"))
    assert not (await ledger.cordon("a")).schedulable
    assert not (await ledger.node("a")).schedulable  # type: ignore[union-attr]
    assert (await ledger.uncordon("a")).schedulable
