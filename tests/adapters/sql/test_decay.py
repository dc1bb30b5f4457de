"""The decay rule compiled to SQL agrees with the domain's ``remaining``, on every backend.

For generated charges (fresh, at the ends of the window, past it, stamped ahead of ``now``, a
zero window) the database's term for each placement equals the domain's exactly, and a node's
GROUP BY sum equals the domain's ``decayed_total`` up to the order the terms are added in.
"""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings

from fleetgate.adapters.sql.decay import decayed_sum, remaining_demand
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.adapters.sql.schema import placements
from fleetgate.domain.capacity.demand import decayed_total, remaining
from fleetgate.domain.capacity.dimensions import Capacity
from fleetgate.domain.capacity.model import NodeSpec
from tests.strategies import demand_charges

DB_SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def expected_term(demand: float, admitted_at: float, now: float, decay: float) -> float:
    """The domain's rule for one placement (a charge that is not positive was never counted)."""
    return remaining(demand, now - admitted_at, decay) if demand > 0 else 0.0


async def put_placements(ledger: SqlLedger, charges: list[tuple[str, float, float]]) -> list[str]:
    for name in "abc":
        if await ledger.node(name) is None:
            await ledger.add_node(NodeSpec(name, Capacity(1, 1, 1)))
    ids = [str(uuid.uuid4()) for _ in charges]
    async with ledger.store.engine.begin() as conn:
        await conn.execute(sa.delete(placements))
        if charges:
            await conn.execute(
                sa.insert(placements),
                [
                    {
                        "id": pid,
                        "namespace": "web",
                        "node": node,
                        "cpus": 0,
                        "memory_mb": 0,
                        "disk_gb": 0,
                        "demand": demand,
                        "admitted_at": at,
                        "request_id": None,
                        "claim_id": None,
                    }
                    for pid, (node, demand, at) in zip(ids, charges, strict=True)
                ],
            )
    return ids


@DB_SETTINGS
@given(case=demand_charges())
async def test_each_placements_term_is_the_domains_remaining_exactly(
    ledger: SqlLedger, case: dict
) -> None:
    now, decay, charges = case["now"], case["decay"], case["charges"]
    ids = await put_placements(ledger, charges)
    async with ledger.store.engine.connect() as conn:
        rows = await conn.execute(
            sa.select(placements.c.id, remaining_demand(now, decay).label("left"))
        )
        got = {pid: float(left) for pid, left in rows}
    want = {
        pid: expected_term(demand, at, now, decay)
        for pid, (_, demand, at) in zip(ids, charges, strict=True)
    }
    assert got == want


@DB_SETTINGS
@given(case=demand_charges())
async def test_a_nodes_sum_is_the_domains_decayed_total(ledger: SqlLedger, case: dict) -> None:
    now, decay, charges = case["now"], case["decay"], case["charges"]
    await put_placements(ledger, charges)
    async with ledger.store.engine.connect() as conn:
        rows = await conn.execute(
            sa.select(placements.c.node, decayed_sum(now, decay)).group_by(placements.c.node)
        )
        got = {node: float(total) for node, total in rows}
    for node in {node for node, _, _ in charges}:
        mine = [(d, now - at) for n, d, at in charges if n == node and d > 0]
        assert got[node] == pytest.approx(decayed_total(mine, decay), rel=1e-12, abs=1e-9)
