"""Writing ledger rows directly, to put the database in a state a test needs.

Only for arranging a test: every assertion goes through the ledger's own operations.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.adapters.sql.schema import CLUSTER_ID, claims, cluster, nodes, placements
from fleetgate.domain.capacity.dimensions import ALLOCATION, Resources


async def set_cluster(ledger: SqlLedger, **values: Any) -> None:
    """Overwrite columns of the cluster row."""
    async with ledger.store.engine.begin() as conn:
        await conn.execute(sa.update(cluster).where(cluster.c.id == CLUSTER_ID).values(**values))


async def set_node(ledger: SqlLedger, name: str, **values: Any) -> None:
    """Overwrite columns of one node row."""
    async with ledger.store.engine.begin() as conn:
        await conn.execute(sa.update(nodes).where(nodes.c.name == name).values(**values))


async def insert_claim(
    ledger: SqlLedger,
    namespace: str,
    limit: Resources,
    used: Resources = Resources(),
    *,
    claim_id: str = "claim-1",
    expires_in: float = 3600.0,
    active: bool = True,
) -> str:
    """An active (or expired) claim row for ``namespace``, expiring relative to the ledger clock."""
    now = ledger.store.now_epoch()
    row: dict[str, Any] = {
        "id": claim_id,
        "namespace": namespace,
        "state": "active" if active else "expired",
        "active_namespace": namespace if active else None,
        "expires_at": now + expires_in,
        "created_at": now,
        "updated_at": now,
    }
    row |= {f"limit_{d}": limit.get(d) for d in ALLOCATION}
    row |= {f"used_{d}": used.get(d) for d in ALLOCATION}
    async with ledger.store.engine.begin() as conn:
        await conn.execute(sa.insert(claims).values(**row))
    return claim_id


async def claim_used(ledger: SqlLedger, claim_id: str) -> Resources:
    """A claim row's used counters."""
    async with ledger.store.engine.connect() as conn:
        row = (
            (await conn.execute(sa.select(claims).where(claims.c.id == claim_id))).mappings().one()
        )
    return Resources(*(int(row[f"used_{d}"]) for d in ALLOCATION))


async def placement_count(ledger: SqlLedger) -> int:
    """How many placement rows exist."""
    async with ledger.store.engine.connect() as conn:
        return int(
            (await conn.execute(sa.select(sa.func.count()).select_from(placements))).scalar_one()
        )
