"""The guarded-UPDATE idiom every charge uses, and the locked read behind a refusal's detail.

A charge is one ``UPDATE … SET used = used + x WHERE key AND <guard>``; ``rowcount`` 1 means it
fit (MariaDB counts matched rows, so a zero-sized charge is not mistaken for a refusal). On 0,
the row is locked with a no-op UPDATE and read back under that lock, and the *domain* evaluates
the same guard on it. The detail therefore names the predicate that really failed — a
demand-only refusal is never reported as "nothing exceeded" — and if the row changed between
the two statements so that the guard now holds, the charge is simply issued again under the lock.

Reads inside a transaction are locking reads (``FOR UPDATE``) of rows the transaction has
already locked: they open no snapshot, so MariaDB's ``innodb_snapshot_isolation`` has nothing
to conflict with in the statements that follow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import ColumnElement

from fleetgate.adapters.sql import prepared
from fleetgate.adapters.sql.rows import guard_row
from fleetgate.domain.capacity.denials import Denial, deny
from fleetgate.domain.capacity.errors import GuardMismatch
from fleetgate.domain.capacity.guards import Guard

Number = int | float


class RowMissing(LookupError):
    """The key matched no row (the caller turns this into NodeNotFound and the like)."""


@dataclass(frozen=True)
class Charge:
    """The outcome of one guarded charge: refused (``denial``) or made.

    ``bypassed`` is the refusal an unenforced charge overrode (``enforce=False``); ``row`` the
    charged row when the guarded UPDATE returned it.
    """

    denial: Denial | None = None
    bypassed: Denial | None = None
    row: RowMapping | None = None

    @property
    def made(self) -> bool:
        """True when the counters moved."""
        return self.denial is None


async def update(
    conn: AsyncConnection,
    table: sa.Table,
    condition: ColumnElement[bool],
    values: Mapping[str, Any],
) -> int:
    """``UPDATE table SET values WHERE condition``; returns the number of matched rows."""
    result = await conn.execute(sa.update(table).where(condition).values(**values))
    return int(result.rowcount)


async def lock(conn: AsyncConnection, table: sa.Table, key: ColumnElement[bool]) -> int:
    """Lock the keyed row with a no-op UPDATE (a write, so never a snapshot-opening read)."""
    return await update(conn, table, key, {"updated_at": table.c.updated_at})


async def read_locked(
    conn: AsyncConnection, table: sa.Table, key: ColumnElement[bool]
) -> dict[str, Any] | None:
    """Read a row this transaction has locked (``FOR UPDATE``; a no-op clause on SQLite)."""
    result = await conn.execute(sa.select(table).where(key).with_for_update())
    row = result.mappings().first()
    return None if row is None else dict(row)


async def lock_and_read_if_any(
    conn: AsyncConnection, table: sa.Table, key: ColumnElement[bool]
) -> dict[str, Any] | None:
    """Lock then read the keyed row; None if there is none.

    Where the dialect has ``UPDATE … RETURNING`` (PostgreSQL, SQLite) the no-op UPDATE that
    locks the row returns it: one round trip, where MariaDB needs the locking read after it.
    The rows this locks are the hot ones (a claim, the cluster row, a node), and every round
    trip while holding one is a wait its waiters share (issue 45).
    """
    if conn.dialect.update_returning:
        touch = sa.update(table).where(key).values(updated_at=table.c.updated_at)
        returned = (await conn.execute(touch.returning(*table.c))).mappings().first()
        return None if returned is None else dict(returned)
    if await lock(conn, table, key) == 0:
        return None
    return await read_locked(conn, table, key)


async def lock_and_read(
    conn: AsyncConnection, table: sa.Table, key: ColumnElement[bool]
) -> dict[str, Any]:
    """Lock then read the keyed row; RowMissing if there is none."""
    row = await lock_and_read_if_any(conn, table, key)
    if row is None:
        raise RowMissing(str(key))
    return row


async def lock_and_read_keyed(
    conn: AsyncConnection, table: sa.Table, keys: prepared.Keys
) -> dict[str, Any]:
    """``lock_and_read`` from prepared statements (the admission's path); RowMissing if none."""
    touch, binds = prepared.touch(table, keys)
    if int((await conn.execute(touch, binds)).rowcount) == 0:
        raise RowMissing(_describe(table, keys))
    select, binds = prepared.locked_row(table, keys)
    row = (await conn.execute(select, binds)).mappings().first()
    if row is None:  # pragma: no cover - we hold the row's lock
        raise RowMissing(_describe(table, keys))
    return dict(row)


def _describe(table: sa.Table, keys: prepared.Keys) -> str:
    return f"{table.name} where {dict(keys)}"


async def charge(
    conn: AsyncConnection,
    table: sa.Table,
    keys: prepared.Keys,
    guard: Guard | None,
    params: Mapping[str, Number],
    sets: Mapping[prepared.Set, Any],
    *,
    enforce: bool = True,
    returning: bool = False,
) -> Charge:
    """Apply ``sets`` to the keyed row if ``guard`` admits ``params`` (or regardless, unenforced).

    The one code path of every charge: the guarded UPDATE (prepared: built once per shape), and
    only when it matches no row the lock, the read and the domain's verdict on the row. No guard
    (an advisory claim) is a plain charge. ``returning``: the guarded UPDATE returns the charged
    row (``Charge.row``) where the dialect can, sparing a read afterwards.
    Raises RowMissing when the key matches nothing, GuardMismatch if the database and the domain
    disagree about the guard on a locked row (a bug: never retried, never hidden).
    """
    if enforce or guard is None:
        statement, binds = prepared.guarded_update(
            table, keys, guard, params, sets, returning=returning
        )
        result = await conn.execute(statement, binds)
        if returning:
            charged = result.mappings().first()
            if charged is not None:
                return Charge(row=charged)
        elif int(result.rowcount) == 1:
            return Charge()
        if guard is None:  # nothing but the key can have failed: no such row
            raise RowMissing(_describe(table, keys))
    assert guard is not None  # the unguarded charge returned or raised above
    row = await lock_and_read_keyed(conn, table, keys)
    denial = deny(guard, guard_row(row), params)
    if enforce:
        if denial is not None:
            return Charge(denial=denial)
        # The refusing UPDATE saw an older version of the row; under our lock the guard holds.
        statement, binds = prepared.guarded_update(table, keys, guard, params, sets)
        if int((await conn.execute(statement, binds)).rowcount) != 1:
            raise GuardMismatch(
                f"{guard.stage} guard: the database refused a row the domain admits: {row}"
            )
        return Charge()
    statement, binds = prepared.guarded_update(table, keys, None, params, sets)
    if int((await conn.execute(statement, binds)).rowcount) != 1:  # pragma: no cover - locked
        raise RowMissing(_describe(table, keys))
    return Charge(bypassed=denial)
