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

Reads of the placements are set-based: one GROUP BY node returns each node's usage and its
decayed demand (the domain's decay rule compiled to SQL in ``decay``), one GROUP BY namespace the
claims' usage; no placement is read row by row. Only node rows that differ from what the pass
recomputed are written back, in the form the dialect's plugin chooses
(``DialectSupport.write_node_counters``): at 10,000 nodes a per-row UPDATE is 10,000 round trips
on MariaDB, whose driver batches only INSERTs. ``lock_counters``, ``read_snapshot`` and ``apply``
are the pass's three phases, exposed so a test can interleave a real admission between them.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from fleetgate.adapters.sql import reservations
from fleetgate.adapters.sql.claims import claim_of
from fleetgate.adapters.sql.decay import decayed_sum
from fleetgate.adapters.sql.dialect import DialectSupport
from fleetgate.adapters.sql.engine import Store
from fleetgate.adapters.sql.events import Audited
from fleetgate.adapters.sql.guarded import lock, read_locked
from fleetgate.adapters.sql.rows import cluster_state, resources
from fleetgate.adapters.sql.schema import CLUSTER_ID, claims, cluster, nodes, placements
from fleetgate.adapters.sql.sqltypes import epoch
from fleetgate.domain.capacity.claims import ClaimState
from fleetgate.domain.capacity.dimensions import ALLOCATION, Resources
from fleetgate.domain.capacity.reconcile import (
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


async def _by_node(
    conn: AsyncConnection, dialect: DialectSupport, now: datetime, decay_seconds: float
) -> tuple[dict[str, Resources], dict[str, float]]:
    """Each node's usage and decayed demand, from one scan of the placements."""
    # BIGINT, not the NUMERIC PostgreSQL makes of a SUM of BIGINTs: 30,000 Decimals cost the
    # client more to decode than the ints do.
    sums = [
        sa.cast(sa.func.coalesce(sa.func.sum(placements.c[d]), 0), sa.BigInteger()).label(d)
        for d in ALLOCATION
    ]
    left = decayed_sum(epoch(now), decay_seconds).label("left")
    node = dialect.grouping(placements.c.node)
    rows = await conn.execute(sa.select(node.label("node"), *sums, left).group_by(node))
    usage: dict[str, Resources] = {}
    demand: dict[str, float] = {}
    for r in rows.mappings():
        usage[r["node"]] = resources(r)
        demand[r["node"]] = float(r["left"])
    return usage, demand


async def read_snapshot(
    conn: AsyncConnection,
    dialect: DialectSupport,
    node_rows: list[NodeCounters],
    now: datetime,
    decay_seconds: float,
) -> Snapshot:
    """Read everything the pass recomputes from, under the locks ``lock_counters`` took."""
    node_usage, node_demand = await _by_node(conn, dialect, now, decay_seconds)
    claim_rows = await conn.execute(sa.select(claims).where(_ACTIVE).with_for_update())
    row = await read_locked(conn, cluster, cluster.c.id == CLUSTER_ID)
    return Snapshot(
        nodes=node_rows,
        node_usage=node_usage,
        namespace_usage=await _usage_by(conn, placements.c.namespace),
        charges=[],
        claims=[claim_of(r) for r in claim_rows.mappings()],
        cluster=None if row is None else cluster_state(row),
        node_demand=node_demand,
        node_reserved=await reservations.reserved_by_node(conn),
    )


def _counts(prefix: str, amount: Resources) -> dict[str, int]:
    return {f"{prefix}{d}": amount.get(d) for d in ALLOCATION}


async def apply(
    conn: AsyncConnection, dialect: DialectSupport, result: Reconciliation, now: float
) -> int:
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
    changed_nodes = [n for n in result.nodes if n.changed]
    if changed_nodes:
        await dialect.write_node_counters(conn, changed_nodes, now)
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


async def run_pass(
    store: Store, decay_seconds: float, trail: Audited[PassReport] | None = None
) -> PassReport:
    """One whole pass in one transaction; the report carries its wall-clock duration.

    ``trail``'s events (its corrections, its expired claims) commit with the pass.
    """
    started = time.perf_counter()

    async def work(conn: AsyncConnection) -> PassReport:
        now = store.now()
        node_rows = await lock_counters(conn)
        # Reservations that no longer hold room end first, crediting their nodes under the
        # locks just taken; the recompute then counts the live ones (capacity.reservations).
        credited = await reservations.expire(conn, epoch(now))
        node_rows = [
            replace(n, used=n.used.minus_floored(credited[n.name])) if n.name in credited else n
            for n in node_rows
        ]
        snapshot = await read_snapshot(conn, store.dialect, node_rows, now, decay_seconds)
        result = reconcile(snapshot, now, decay_seconds)
        reattributed = await apply(conn, store.dialect, result, epoch(now))
        return PassReport(result, time.perf_counter() - started, reattributed)

    report = await (trail or Audited(None)).write(store, work, what="reconcile capacity")
    # Timed to the commit, not to the end of the statements the audit saw.
    return replace(report, duration_seconds=time.perf_counter() - started)


__all__ = ["apply", "lock_counters", "read_snapshot", "run_pass"]
