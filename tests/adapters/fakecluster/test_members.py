"""A pool's member lists are handed out by change: an unchanged list is the same tuple."""

from __future__ import annotations

from datetime import UTC, datetime

from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.fakecluster.cluster import FakeCluster

T0 = datetime(2024, 1, 1, tzinfo=UTC)


async def test_an_unchanged_member_list_is_the_same_tuple_and_a_changed_one_a_new_one() -> None:
    cluster = FakeCluster(VirtualClock(T0))
    cluster.add_pool("pool", expire_after="14d")
    a = cluster.add_node("pool", "a", workload={"cpu": 1_000})
    cluster.add_node("pool", "b")
    first = await cluster.observe("pool")
    await cluster.annotate_claim(a, {"x": "1"})  # a claim changes; its node and Pods do not
    second = await cluster.observe("pool")
    assert first is not None and second is not None and second is not first
    assert second.claims is not first.claims and second.claims[0].annotations == {"x": "1"}
    assert second.nodes is first.nodes and second.pods is first.pods
    await cluster.annotate_node(a, {"y": "1"})
    third = await cluster.observe("pool")
    assert third is not None and third.claims is second.claims
    assert third.nodes is not second.nodes and third.nodes[0].annotations == {"y": "1"}
    await cluster.delete_claim("b")  # a member that changes in place is a new list too
    fourth = await cluster.observe("pool")
    assert fourth is not None and fourth.claims is not third.claims
    assert [c.name for c in fourth.claims] == ["a", "b"] and fourth.claims[1].deleting
    assert fourth.nodes is third.nodes  # b's node did not change
    cluster.clock.advance(cluster.pools["pool"].drain_time)
    gone = await cluster.observe("pool")
    assert gone is not None and [n.name for n in gone.nodes] == ["a"]
    assert gone.pods is fourth.pods  # the Pods bound to a did not move
