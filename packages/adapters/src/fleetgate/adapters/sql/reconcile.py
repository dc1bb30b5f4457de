"""One reconcile pass in the ledger: lock every counter row, recompute, write, one commit.

An admission that commits while a pass runs must never be erased by it. The pass therefore
takes the lock of every row it will write *before* it reads anything, in the canonical order
(the active claims, the cluster row, the claims again — a create committed while we waited for
the cluster row is now visible — then every node by name). Every admission, release and move
writes at least one of those rows, so from then until the pass commits none of them can commit:
what the pass reads (counters and placements alike) is one consistent state, and what it writes
is exact for it. An admission that had already locked one of those rows holds the pass back
until it commits, and is then part of what the pass reads. Deadlocks this ordering cannot rule
out (a claim create inserting between our two claim locks) are retried whole, like any other.

Reads of the placements are set-based (sums grouped by node and by namespace); only placements
young enough to still carry demand are read row by row, because their decay is the domain's
arithmetic. Writes are batched UPDATEs. ``lock_counters``, ``read_snapshot`` and ``apply`` are
the pass's three phases, exposed so a test can interleave a real admission between them.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from fleetgate.adapters.sql.claims import claim_of
from fleetgate.adapters.sql.engine import Store
from fleetgate.adapters.sql.guarded import lock, read_locked
from fleetgate.adapters.sql.rows import cluster_state, resources
from fleetgate.adapters.sql.schema import CLUSTER_ID, claims, cluster, nodes, placements
from fleetgate.adapters.sql.sqltypes import epoch, instant
from fleetgate.domain.capacity.claims import ClaimState
from fleetgate.domain.capacity.dimensions import ALLOCATION, Resources
from fleetgate.domain.capacity.reconcile import (
    DemandCharge,
    NodeCounters,
    PassReport,
    Reconciliation,
    Snapshot,
    reconcile,
)

_ACTIVE = claims.c.active_namespace.is_not(None)


async def lock_counters(conn: AsyncConnection) -> list[NodeCounters]:
    """Take the lock of every counter row, in the canonical order; return the nodes as read."""
    touch = {"updated_at": claims.c.updated_at}
    await conn.execute(sa.update(claims).where(_ACTIVE).values(**touch))
    await lock(conn, cluster, cluster.c.id == CLUSTER_ID)
    await conn.execute(sa.update(claims).where(_ACTIVE).values(**touch))
    rows = await conn.execute(
        sa.select(
            nodes.c.name,
            *(nodes.c[f"limit_{d}"] for d in ALLOCATION),
            *(nodes.c[f"used_{d}"] for d in ALLOCATION),
            nodes.c.expected_demand,
        )
        .order_by(nodes.c.name)
        .with_for_update()
    )
    return [
        NodeCounters(
            name=r["name"],
            limits=resources(r, "limit_"),
            used=resources(r, "used_"),
            expected_demand=float(r["expected_demand"]),
        )
        for r in rows.mappings()
    ]


async def _usage_by(conn: AsyncConnection, column: sa.Column[Any]) -> dict[str, Resources]:
    sums = [sa.func.coalesce(sa.func.sum(placements.c[d]), 0).label(d) for d in ALLOCATION]
    rows = await conn.execute(sa.select(column.label("key"), *sums).group_by(column))
    return {r["key"]: resources(r) for r in rows.mappings()}


async def read_snapshot(
    conn: AsyncConnection, node_rows: list[NodeCounters], now: datetime, decay_seconds: float
) -> Snapshot:
    """Read everything the pass recomputes from, under the locks ``lock_counters`` took."""
    charges: list[DemandCharge] = []
    if decay_seconds > 0:
        since = epoch(now - timedelta(seconds=decay_seconds))
        rows = await conn.execute(
            sa.select(placements.c.node, placements.c.demand, placements.c.admitted_at).where(
                placements.c.admitted_at > since, placements.c.demand > 0
            )
        )
        charges = [
            DemandCharge(node, float(demand), instant(float(at))) for node, demand, at in rows
        ]
    claim_rows = await conn.execute(sa.select(claims).where(_ACTIVE).with_for_update())
    row = await read_locked(conn, cluster, cluster.c.id == CLUSTER_ID)
    return Snapshot(
        nodes=node_rows,
        node_usage=await _usage_by(conn, placements.c.node),
        namespace_usage=await _usage_by(conn, placements.c.namespace),
        charges=charges,
        claims=[claim_of(r) for r in claim_rows.mappings()],
        cluster=None if row is None else cluster_state(row),
    )


def _counts(prefix: str, amount: Resources) -> dict[str, int]:
    return {f"{prefix}{d}": amount.get(d) for d in ALLOCATION}


async def apply(conn: AsyncConnection, result: Reconciliation, now: float) -> int:
    """Write the pass's results; return how many placements were re-attributed to a claim."""
    if result.expired:
        await conn.execute(
            sa.update(claims)
            .where(claims.c.id.in_([c.id for c in result.expired]))
            .values(state=ClaimState.EXPIRED.value, active_namespace=None, updated_at=now)
        )
    changed = [c for c in result.claims if not c.drift.is_zero()]
    if changed:
        await conn.execute(
            sa.update(claims)
            .where(claims.c.id == sa.bindparam("b_id"))
            .values(
                **{f"used_{d}": sa.bindparam(f"b_{d}", type_=sa.BigInteger()) for d in ALLOCATION},
                updated_at=now,
            ),
            [{"b_id": c.id, **{f"b_{d}": c.used.get(d) for d in ALLOCATION}} for c in changed],
        )
    if result.nodes:
        await conn.execute(
            sa.update(nodes)
            .where(nodes.c.name == sa.bindparam("b_name"))
            .values(
                **{f"used_{d}": sa.bindparam(f"b_{d}", type_=sa.BigInteger()) for d in ALLOCATION},
                expected_demand=sa.bindparam("b_demand", type_=sa.Double()),
                updated_at=now,
            ),
            [
                {
                    "b_name": n.name,
                    "b_demand": n.expected_demand,
                    **{f"b_{d}": n.used.get(d) for d in ALLOCATION},
                }
                for n in result.nodes
            ],
        )
    c = result.cluster
    values = {
        **_counts("total_", c.total),
        **_counts("claimed_", c.claimed),
        **_counts("unclaimed_used_", c.unclaimed_used),
        "updated_at": now,
    }
    if c.created:
        await conn.execute(sa.insert(cluster).values(id=CLUSTER_ID, **values))
    else:
        await conn.execute(sa.update(cluster).where(cluster.c.id == CLUSTER_ID).values(**values))
    return await _reattribute(conn, result)


async def _reattribute(conn: AsyncConnection, result: Reconciliation) -> int:
    """Point every placement of a claimed namespace at its claim, so releases credit it.

    Read first, write only what is wrong: normally nothing is, and no placement row is locked.
    """
    if not result.claim_of:
        return 0
    joined = sa.join(claims, placements, claims.c.active_namespace == placements.c.namespace)
    wrong = await conn.execute(
        sa.select(placements.c.id, claims.c.id.label("claim"))
        .select_from(joined)
        .where(sa.or_(placements.c.claim_id.is_(None), placements.c.claim_id != claims.c.id))
    )
    fixes = [{"b_id": pid, "b_claim": cid} for pid, cid in wrong]
    if fixes:
        await conn.execute(
            sa.update(placements)
            .where(placements.c.id == sa.bindparam("b_id"))
            .values(claim_id=sa.bindparam("b_claim")),
            fixes,
        )
    return len(fixes)


async def run_pass(store: Store, decay_seconds: float) -> PassReport:
    """One whole pass in one transaction; the report carries its wall-clock duration."""
    started = time.perf_counter()

    async def work(conn: AsyncConnection) -> tuple[Reconciliation, int]:
        now = store.now()
        node_rows = await lock_counters(conn)
        snapshot = await read_snapshot(conn, node_rows, now, decay_seconds)
        result = reconcile(snapshot, now, decay_seconds)
        reattributed = await apply(conn, result, epoch(now))
        return result, reattributed

    result, reattributed = await store.write(work, what="reconcile capacity")
    return PassReport(result, time.perf_counter() - started, reattributed)


__all__ = ["apply", "lock_counters", "read_snapshot", "run_pass"]
