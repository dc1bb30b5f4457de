"""Writing a reconcile pass's node counters back: thousands of rows, one statement per dialect.

A pass can rewrite every node row (the demand decays on all of them between two passes). An
``executemany`` UPDATE is one round trip per row on MariaDB (aiomysql batches only INSERT ...
VALUES) and a pipelined one per row on PostgreSQL, so each server dialect gets a set-based form:

- PostgreSQL: ``UPDATE nodes ... FROM unnest(<one array per column>)``, one statement with five
  parameters whatever the row count (asyncpg sends each array as one typed value);
- MariaDB: the rows go into a temporary table with one multi-row INSERT, then one
  ``UPDATE nodes JOIN`` it (CREATE/DROP TEMPORARY TABLE do not end the transaction);
- SQLite: a batched UPDATE, since the database runs in the process and has no round trips.

All three write the same values: the rows' locks were taken by the pass before it read.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncConnection

from fleetgate.adapters.sql.schema import NODE_NAME, TABLE_ARGS, nodes
from fleetgate.domain.capacity.dimensions import ALLOCATION
from fleetgate.domain.capacity.reconcile import NodeResult

_COLUMNS = [f"used_{d}" for d in ALLOCATION]

#: The pass's rows on MariaDB; per connection, so concurrent passes never share it.
_staged = sa.Table(
    "reconcile_node_rows",
    sa.MetaData(),
    sa.Column("name", sa.String(NODE_NAME), primary_key=True),
    *(sa.Column(c, sa.BigInteger(), nullable=False) for c in _COLUMNS),
    sa.Column("expected_demand", sa.Double(), nullable=False),
    prefixes=["TEMPORARY"],
    **TABLE_ARGS,
)


def _values(rows: list[NodeResult]) -> list[dict[str, Any]]:
    return [
        {
            "name": n.name,
            **{f"used_{d}": n.used.get(d) for d in ALLOCATION},
            "expected_demand": n.expected_demand,
        }
        for n in rows
    ]


async def update_from_arrays(conn: AsyncConnection, rows: list[NodeResult], now: float) -> None:
    """PostgreSQL: one UPDATE joined to ``unnest`` of one array parameter per column."""
    bigints = postgresql.ARRAY(sa.BigInteger())
    arrays = [
        sa.bindparam("names", [n.name for n in rows], type_=postgresql.ARRAY(sa.String())),
        *(
            sa.bindparam(c, [n.used.get(d) for n in rows], type_=bigints)
            for c, d in zip(_COLUMNS, ALLOCATION, strict=True)
        ),
        sa.bindparam(
            "demand", [n.expected_demand for n in rows], type_=postgresql.ARRAY(sa.Double())
        ),
    ]
    given = (
        sa.func.unnest(*arrays)
        .table_valued("name", *_COLUMNS, "expected_demand")
        .render_derived(name="given")
    )
    await conn.execute(_update_from(given, now))


def _update_from(source: Any, now: float) -> sa.Update:
    """``UPDATE nodes`` from the rows of ``source`` matched by name (both set-based forms)."""
    return (
        sa.update(nodes)
        .where(nodes.c.name == source.c.name)
        .values(
            **{c: source.c[c] for c in _COLUMNS},
            expected_demand=source.c.expected_demand,
            updated_at=now,
        )
    )


async def update_joining_temporary(
    conn: AsyncConnection, rows: list[NodeResult], now: float
) -> None:
    """MariaDB: stage the rows in a temporary table, then one UPDATE joined to it."""
    # A pass that failed on this pooled connection may have left its table behind.
    await conn.execute(sa.text(f"DROP TEMPORARY TABLE IF EXISTS {_staged.name}"))
    await conn.execute(sa.schema.CreateTable(_staged))
    await conn.execute(sa.insert(_staged), _values(rows))
    await conn.execute(_update_from(_staged, now))
    await conn.execute(sa.text(f"DROP TEMPORARY TABLE {_staged.name}"))


async def update_each(conn: AsyncConnection, rows: list[NodeResult], now: float) -> None:
    """SQLite: a batched UPDATE by name."""
    await conn.execute(
        sa.update(nodes)
        .where(nodes.c.name == sa.bindparam("b_name"))
        .values(
            **{c: sa.bindparam(f"b_{c}", type_=sa.BigInteger()) for c in _COLUMNS},
            expected_demand=sa.bindparam("b_expected_demand", type_=sa.Double()),
            updated_at=now,
        ),
        [{f"b_{k}": v for k, v in row.items()} for row in _values(rows)],
    )


__all__ = ["update_each", "update_from_arrays", "update_joining_temporary"]
