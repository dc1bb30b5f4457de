"""The generic batch executor: each admission of a batch in a SAVEPOINT of its own.

Every dialect has savepoints (SQLite under our ``BEGIN IMMEDIATE``, MariaDB, PostgreSQL), so one
executor serves all three; PostgreSQL may use a server-side one instead (``batch_items``). An
item sets a ``SAVEPOINT`` of its own, then runs the one-admission statements
(``admission.admit_in``) in canonical order; anything that stops it rolls back to the
savepoint, which undoes that item's writes and nothing of the items before it. What the item
came to is reported as an
:class:`~fleetgate.adapters.sql.batch_items.ItemResult`; an error the savepoint cannot survive
(the transaction itself is gone) is raised, and the group committer splits the batch.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from fleetgate.adapters.sql import admission
from fleetgate.adapters.sql.batch_items import BatchItem, ItemResult, Outcome
from fleetgate.adapters.sql.dialect import error_code
from fleetgate.domain.capacity.claims import ClaimEnforcement
from fleetgate.domain.capacity.errors import NodeNotFound

#: Errors that end one statement, not the transaction, so the item's savepoint can be rolled
#: back and the item admitted alone: PostgreSQL's deadlock (the victim statement only) and lock
#: or statement timeouts; MariaDB's lock wait timeout (innodb_rollback_on_timeout is off by
#: default). MariaDB's deadlock (1213) rolls the whole transaction back: never in this set.
SURVIVABLE = frozenset({"40P01", "55P03", "57014", 1205})


def _placement_insert(exc: IntegrityError) -> bool:
    """Whether the failed statement is the item's placement INSERT (its UNIQUE request id)."""
    return str(exc.statement or "").lstrip().upper().startswith("INSERT INTO PLACEMENTS")


async def admit_one(
    conn: AsyncConnection,
    item: BatchItem,
    now: float,
    enforcement: ClaimEnforcement,
    savepoint: str = "fg_item",
) -> ItemResult:
    """One item inside its savepoint; its result, or raise when the transaction is unusable.

    The savepoint is never released: the COMMIT releases every savepoint at once, and a RELEASE
    per item would be one more round trip per admission (``begin_nested`` always sends it).
    """
    request = item.request
    await conn.exec_driver_sql(f"SAVEPOINT {savepoint}")
    try:
        made = await admission.admit_in(
            conn, request, item.placement_id, now, enforcement, audit=None
        )
    except (admission.Refused, NodeNotFound, admission.ClaimAppeared, DBAPIError) as exc:
        if isinstance(exc, DBAPIError) and exc.connection_invalidated:
            # The connection is gone and SQLAlchemy has discarded it: a ROLLBACK TO SAVEPOINT
            # would only meet "can't reconnect until invalid transaction is rolled back".
            # Raised as it is, the batch's transaction ends and the group committer splits it.
            raise
        # If the transaction itself is gone (MariaDB's deadlock), this fails too, and that
        # error goes up: the group committer splits the batch.
        await conn.exec_driver_sql(f"ROLLBACK TO SAVEPOINT {savepoint}")
        return _undone(exc)
    events = tuple(item.audit(made)) if item.audit is not None else ()
    return ItemResult(Outcome.ADMITTED, admission=made, events=events)


def _undone(exc: Exception) -> ItemResult:
    """What an item rolled back to its savepoint came to; raises ``exc`` if nothing it knows."""
    if isinstance(exc, admission.Refused):
        return ItemResult(Outcome.REFUSED, denial=exc.denial)
    if isinstance(exc, NodeNotFound):
        return ItemResult(Outcome.NO_NODE)
    if isinstance(exc, admission.ClaimAppeared):
        return ItemResult(Outcome.SOLO, reason="a claim appeared for the namespace")
    if isinstance(exc, IntegrityError) and _placement_insert(exc):
        return ItemResult(Outcome.DUPLICATE)
    if isinstance(exc, DBAPIError) and error_code(exc) in SURVIVABLE:
        # The savepoint's ROLLBACK worked: the transaction is still ours, only this item has
        # to run again.
        return ItemResult(Outcome.SOLO, reason=f"met {exc.orig} inside the batch")
    raise exc


async def admit_each(
    conn: AsyncConnection,
    items: Sequence[BatchItem],
    now: float,
    enforcement: ClaimEnforcement,
) -> list[ItemResult]:
    """The BatchExecutor: every item in order, each in its own savepoint."""
    return [
        await admit_one(conn, item, now, enforcement, f"fg_item_{i}")
        for i, item in enumerate(items)
    ]


__all__ = ["SURVIVABLE", "admit_each", "admit_one"]
