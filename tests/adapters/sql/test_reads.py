"""The API's reads: nodes by name, placements by namespace and node in admission order."""

from __future__ import annotations

from datetime import timedelta

from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.model import AdmitRequest, NodeSpec
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
