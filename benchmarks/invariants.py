"""The over-commit check: every counter equals its recomputation from the placements, in bounds.

Read in one transaction that sees one snapshot (the dialect's ``snapshot_options``: REPEATABLE
READ on the servers, a deferred ``BEGIN`` on SQLite's WAL), so the check can run while writers
are busy and still compare like with like. This is the benchmark's own evaluator, written from
the definitions, independent of the reconciler it could otherwise only confirm.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.adapters.sql.schema import CLUSTER_ID, claims, cluster, nodes, placements
from fleetgate.domain.capacity.dimensions import ALLOCATION

Sums = dict[str, int]


@dataclass
class Check:
    """The result of one check: what was compared and every violation found."""

    nodes: int = 0
    placements: int = 0
    #: Counters or recomputed sums above their limit (a real over-commit).
    over_commits: list[str] = field(default_factory=list)
    #: Counters that differ from the recomputation (drift).
    drift: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No over-commit and no drift."""
        return not self.over_commits and not self.drift

    def summary(self) -> str:
        """``ok`` or a short description for the tables."""
        if self.ok:
            return "ok"
        return f"{len(self.over_commits)} over-commit(s), {len(self.drift)} drifted counter(s)"


def _sums(row: Sequence[Any] | None, offset: int = 0) -> Sums:
    if row is None:
        return dict.fromkeys(ALLOCATION, 0)
    return {d: int(row[offset + i] or 0) for i, d in enumerate(ALLOCATION)}


def _sum_columns() -> list[sa.ColumnElement[int]]:
    return [sa.func.coalesce(sa.func.sum(placements.c[d]), 0) for d in ALLOCATION]


async def _node_check(conn: AsyncConnection, check: Check) -> None:
    per_node = (
        sa.select(
            placements.c.node,
            *(c.label(d) for c, d in zip(_sum_columns(), ALLOCATION, strict=True)),
        )
        .group_by(placements.c.node)
        .subquery()
    )
    query = sa.select(
        nodes.c.name,
        *(nodes.c[f"used_{d}"] for d in ALLOCATION),
        *(nodes.c[f"limit_{d}"] for d in ALLOCATION),
        *(sa.func.coalesce(per_node.c[d], 0) for d in ALLOCATION),
    ).select_from(nodes.outerjoin(per_node, per_node.c.node == nodes.c.name))
    for row in await conn.execute(query):
        check.nodes += 1
        name = row[0]
        used, limit, placed = _sums(row, 1), _sums(row, 4), _sums(row, 7)
        for d in ALLOCATION:
            if used[d] != placed[d]:
                check.drift.append(f"node {name} used_{d}={used[d]} != Σ placements {placed[d]}")
            if max(used[d], placed[d]) > limit[d]:
                check.over_commits.append(
                    f"node {name} {d}: used {used[d]}, placed {placed[d]}, limit {limit[d]}"
                )


async def _namespace_check(conn: AsyncConnection, check: Check, now: float) -> None:
    """Claims equal their placements; the cluster's unclaimed sums equal the rest plus overage."""
    active = {
        row.id: row
        for row in await conn.execute(
            sa.select(claims).where(claims.c.state == "active", claims.c.expires_at > now)
        )
    }
    by_claim = {
        row[0]: _sums(row, 1)
        for row in await conn.execute(
            sa.select(placements.c.claim_id, *_sum_columns()).group_by(placements.c.claim_id)
        )
    }
    unclaimed = dict.fromkeys(ALLOCATION, 0)
    for claim_id, sums in by_claim.items():
        if claim_id not in active:
            for d in ALLOCATION:
                unclaimed[d] += sums[d]
    for claim_id, row in active.items():
        placed = by_claim.get(claim_id, dict.fromkeys(ALLOCATION, 0))
        for d in ALLOCATION:
            used, limit = int(row._mapping[f"used_{d}"]), int(row._mapping[f"limit_{d}"])
            if used != placed[d]:
                check.drift.append(f"claim {claim_id} used_{d}={used} != Σ placements {placed[d]}")
            unclaimed[d] += max(0, placed[d] - limit)  # advisory overage is charged to the cluster
    found = (await conn.execute(sa.select(cluster).where(cluster.c.id == CLUSTER_ID))).first()
    if found is None:
        check.drift.append("the cluster row is missing")
        return
    m = found._mapping
    for d in ALLOCATION:
        stored = int(m[f"unclaimed_used_{d}"])
        room = int(m[f"total_{d}"]) - int(m[f"claimed_{d}"])
        if stored != unclaimed[d]:
            check.drift.append(f"cluster unclaimed_used_{d}={stored} != recomputed {unclaimed[d]}")
        if max(stored, unclaimed[d]) > room:
            check.over_commits.append(
                f"cluster {d}: unclaimed used {stored}, recomputed {unclaimed[d]}, room {room}"
            )


async def check(ledger: SqlLedger) -> Check:
    """Check every node, claim and the cluster row against the placements, in one snapshot."""
    result = Check()
    async with ledger.store.engine.connect() as conn:
        conn = await conn.execution_options(**ledger.store.dialect.snapshot_options())
        async with conn.begin():
            count = await conn.execute(sa.select(sa.func.count()).select_from(placements))
            result.placements = int(count.scalar_one())
            await _node_check(conn, result)
            await _namespace_check(conn, result, ledger.store.now_epoch())
    return result
