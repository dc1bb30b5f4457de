"""The API's reads: nodes by name, placements by namespace and node in admission order."""

from __future__ import annotations

from datetime import timedelta

from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.model import AdmitRequest, NodeMetrics, NodeSpec
from tests.ledgers import START


async def test_placements_filter_and_order(ledger: SqlLedger, clock: VirtualClock) -> None:
    for name in ("b", "a"):
        await ledger.add_node(NodeSpec(name, Capacity(8, 8192, 100), labels={"rack": name}))
    made = []
    for ns, node in (("team", "a"), ("other", "a"), ("team", "b")):
        clock.advance(timedelta(seconds=1))
        admission = await ledger.admit(
            AdmitRequest(ns, node, Resources(1, 1, 1), request_id=f"{ns}-{node}")
        )
        made.append(admission.placement)
    assert [n.name for n in await ledger.nodes()] == ["a", "b"]
    assert (await ledger.node("b")).labels == {"rack": "b"}  # type: ignore[union-attr]
    assert await ledger.placements() == made
    assert await ledger.placements("team") == [made[0], made[2]]
    assert await ledger.placements(node="a") == made[:2]
    assert await ledger.placements("team", node="a") == [made[0]]
    assert made[0] is not None and made[0].admitted_at == START + timedelta(seconds=1)
    assert await ledger.placement_by_request("team", "team-b") == made[2]
    assert await ledger.placement_by_request("other", "team-b") is None
    assert await ledger.placement("missing") is None


async def test_reading_every_node_gives_what_reading_each_gives(
    ledger: SqlLedger, clock: VirtualClock
) -> None:
    # nodes() builds the fleet in one pass, sharing repeated values; it must agree field for
    # field with node(), which converts one row the plain way.
    for i, name in enumerate(["n0", "n1", "n2", "n3"]):
        labels = {"zone": f"z{i % 2}"} if i else {}
        await ledger.add_node(NodeSpec(name, Capacity(8, 8192, 100), pool="p", labels=labels))
    await ledger.add_node(NodeSpec("big", Capacity(64, 65536, 1000)))
    clock.advance(timedelta(seconds=3))
    await ledger.publish_metrics("n1", NodeMetrics(cpu_load_1=2.5, cpu_schedulable=6))
    await ledger.publish_metrics("n2", NodeMetrics(cpu_load_1=2.5, cpu_schedulable=6))
    await ledger.publish_metrics("n3", NodeMetrics(cpu_load_1=None, cpu_schedulable=8))
    await ledger.cordon("n3")
    await ledger.admit(AdmitRequest("team", "n2", Resources(2, 1024, 5), demand=1.2))
    every = await ledger.nodes()
    assert every == [await ledger.node(n.name) for n in every]
    assert [n.name for n in every] == ["big", "n0", "n1", "n2", "n3"]
    every[1].labels["changed"] = "here"  # one node's labels are not another's
    assert "changed" not in every[2].labels and (await ledger.nodes())[1].labels == {}


async def test_pages_of_placements_walk_every_row_once_by_id(
    ledger: SqlLedger, clock: VirtualClock
) -> None:
    await ledger.add_node(NodeSpec("a", Capacity(64, 65536, 1000)))
    await ledger.add_node(NodeSpec("b", Capacity(64, 65536, 1000)))
    for i in range(7):
        clock.advance(timedelta(seconds=1))
        await ledger.admit(AdmitRequest("team", "ab"[i % 2], Resources(1, 1, 1)))
        await ledger.admit(AdmitRequest("other", "a", Resources(1, 1, 1)))
    team = await ledger.placements("team")
    walked: list[str] = []
    after: str | None = None
    while page := await ledger.placements("team", after=after, limit=3):
        assert len(page) <= 3 and {p.namespace for p in page} == {"team"}
        walked += [p.id for p in page]
        after = page[-1].id
    assert walked == sorted(p.id for p in team)
    # A page and the node filter combine; no limit is the rest of the keyset.
    on_a = sorted(p.id for p in team if p.node == "a")
    assert [p.id for p in await ledger.placements("team", node="a", limit=2)] == on_a[:2]
    assert [p.id for p in await ledger.placements("team", node="a", after=on_a[1])] == on_a[2:]
    # Without after or limit the read is what every other caller has always had.
    assert await ledger.placements("team") == team
    assert [p.admitted_at for p in team] == sorted(p.admitted_at for p in team)


async def test_pages_of_nodes_walk_every_node_once_by_name(ledger: SqlLedger) -> None:
    names = [f"n{i:02d}" for i in range(11)]
    for name in reversed(names):
        await ledger.add_node(NodeSpec(name, Capacity(8, 8192, 100)))
    assert [n.name for n in await ledger.nodes(limit=4)] == names[:4]
    assert [n.name for n in await ledger.nodes(after="n03", limit=4)] == names[4:8]
    assert [n.name for n in await ledger.nodes(after="n07")] == names[8:]
    assert await ledger.nodes(after="n10") == []
    # A key that names no node still resumes after it: a node removed between two pages.
    assert [n.name for n in await ledger.nodes(after="n045", limit=1)] == ["n05"]
    assert await ledger.nodes(after="n03", limit=4) == (await ledger.nodes())[4:8]
