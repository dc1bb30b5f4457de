"""Writing a reconcile pass's node counters back: thousands of rows, as few statements as can be.

A pass can rewrite every node row (the demand decays on all of them between two passes). The
portable form (``update_each``) is one batched UPDATE by name: right for SQLite, which runs in
the process and has no round trips. A server driver may send that batch as one round trip per
row (aiomysql batches only INSERT ... VALUES; asyncpg pipelines one statement per row), so each
server dialect's plugin writes the rows set-based instead, through ``update_from`` here: an
``UPDATE nodes`` joined to the rows, staged however suits the dialect (PostgreSQL: ``unnest`` of
one array per column; MariaDB: a temporary table).

Every form writes the same values: the rows' locks were taken by the pass before it read.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from fleetgate.adapters.sql.schema import nodes
from fleetgate.domain.capacity.dimensions import ALLOCATION
from fleetgate.domain.capacity.reconcile import NodeResult

#: The counter columns a pass writes, besides ``expected_demand`` (in ``ALLOCATION`` order).
COLUMNS = [f"used_{d}" for d in ALLOCATION]


def values_of(rows: list[NodeResult]) -> list[dict[str, Any]]:
    """The rows as column values: ``name``, each of ``COLUMNS`` and ``expected_demand``."""
    return [
        {
            "name": n.name,
            **{f"used_{d}": n.used.get(d) for d in ALLOCATION},
            "expected_demand": n.expected_demand,
        }
        for n in rows
    ]


def update_from(source: Any, now: float) -> sa.Update:
    """``UPDATE nodes`` from the rows of ``source`` matched by name (the set-based forms)."""
    return (
        sa.update(nodes)
        .where(nodes.c.name == source.c.name)
        .values(
            **{c: source.c[c] for c in COLUMNS},
            expected_demand=source.c.expected_demand,
            updated_at=now,
        )
    )


async def update_each(conn: AsyncConnection, rows: list[NodeResult], now: float) -> None:
    """A batched UPDATE by name (the portable form)."""
    await conn.execute(
        sa.update(nodes)
        .where(nodes.c.name == sa.bindparam("b_name"))
        .values(
            **{c: sa.bindparam(f"b_{c}", type_=sa.BigInteger()) for c in COLUMNS},
            expected_demand=sa.bindparam("b_expected_demand", type_=sa.Double()),
            updated_at=now,
        ),
        [{f"b_{k}": v for k, v in row.items()} for row in values_of(rows)],
    )


__all__ = ["COLUMNS", "update_each", "update_from", "values_of"]
