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
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import ColumnElement

from fleetgate.adapters.sql.compile import where
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

    ``bypassed`` is the refusal an unenforced charge overrode (``enforce=False``).
    """

    denial: Denial | None = None
    bypassed: Denial | None = None

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


async def lock_and_read(
    conn: AsyncConnection, table: sa.Table, key: ColumnElement[bool]
) -> dict[str, Any]:
    """Lock then read the keyed row; RowMissing if there is none."""
    if await lock(conn, table, key) == 0:
        raise RowMissing(str(key))
    row = await read_locked(conn, table, key)
    if row is None:  # pragma: no cover - we hold the row's lock
        raise RowMissing(str(key))
    return row


async def charge(
    conn: AsyncConnection,
    table: sa.Table,
    key: ColumnElement[bool],
    guard: Guard,
    params: Mapping[str, Number],
    values: Mapping[str, Any],
    *,
    enforce: bool = True,
    tried: bool = False,
) -> Charge:
    """Apply ``values`` to the keyed row if ``guard`` admits ``params`` (or regardless, unenforced).

    ``tried``: the caller already ran this very guarded UPDATE (``prepared``, the fast path of an
    admission that fits) and it matched no row, so the refusal is read straight away.
    Raises RowMissing when the key matches nothing, GuardMismatch if the database and the domain
    disagree about the guard on a locked row (a bug: never retried, never hidden).
    """
    guarded = sa.and_(key, where(guard, table, params))
    if enforce and not tried and await update(conn, table, guarded, values) == 1:
        return Charge()
    row = await lock_and_read(conn, table, key)
    denial = deny(guard, guard_row(row), params)
    if enforce:
        if denial is not None:
            return Charge(denial=denial)
        # The refusing UPDATE saw an older version of the row; under our lock the guard holds.
        if await update(conn, table, guarded, values) != 1:
            raise GuardMismatch(
                f"{guard.stage} guard: the database refused a row the domain admits: {row}"
            )
        return Charge()
    if await update(conn, table, key, values) != 1:  # pragma: no cover - we hold the row's lock
        raise RowMissing(str(key))
    return Charge(bypassed=denial)
