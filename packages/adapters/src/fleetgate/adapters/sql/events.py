"""The append-only audit trail: writing events, reading them back, and the ledger's EventSink."""

from __future__ import annotations

import json
import logging
import weakref
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Generic, TypeVar

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from fleetgate.adapters.sql import prepared
from fleetgate.adapters.sql.engine import Store, Work
from fleetgate.adapters.sql.schema import events as events_table
from fleetgate.adapters.sql.sqltypes import epoch, instant
from fleetgate.domain.capacity.model import RecordedEvent
from fleetgate.domain.events import Event, Level
from fleetgate.domain.ports import AuditOf

MAX_LIMIT = 1000
R = TypeVar("R")
_log = logging.getLogger("fleetgate.ledger.events")


def _jsonable(value: object) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value)


def _plain(data: dict[str, Any]) -> dict[str, Any]:
    # Events carry domain values (datetimes, enums); the JSON column takes their string forms.
    loaded: dict[str, Any] = json.loads(json.dumps(data, default=_jsonable))
    return loaded


def _row(event: Event) -> dict[str, Any]:
    return {
        "at": epoch(event.at),
        "kind": event.kind[:128],
        "subject": event.subject[:255],
        "namespace": event.namespace,
        "level": event.level.value,
        "data": _plain(event.data),
    }


async def insert_events(conn: AsyncConnection, batch: Sequence[Event]) -> None:
    """Append ``batch`` inside the caller's transaction."""
    if batch:
        await conn.execute(prepared.insert(events_table), [_row(e) for e in batch])


class Audited(Generic[R]):
    """One change's audit: the events ``audit`` builds from its result, inserted last in the
    change's own transaction, so they commit with it or not at all.

    Every writing operation of the ledger that reports a change goes through this one class
    (an admission included). A retried transaction builds the events again from its own result;
    once the change committed, ``committed`` (the ledger's event sink) is told which events
    are in the table, so emitting them to that sink again records nothing twice.
    """

    def __init__(
        self,
        audit: AuditOf[R] | None,
        committed: Callable[[Sequence[Event]], None] | None = None,
    ) -> None:
        self._audit = audit
        self._committed = committed
        self.written: tuple[Event, ...] = ()

    def events_of(self, result: R) -> Sequence[Event]:
        """The events reporting ``result``, kept as those this attempt writes."""
        self.written = () if self._audit is None else tuple(self._audit(result))
        return self.written

    async def insert(self, conn: AsyncConnection, result: R) -> None:
        """Insert the events reporting ``result`` inside the caller's transaction."""
        await insert_events(conn, self.events_of(result))

    def done(self) -> None:
        """After the commit: tell the sink which events the change wrote."""
        if self.written and self._committed is not None:
            self._committed(self.written)

    async def write(
        self, store: Store, work: Work[R], *, what: str, isolation: str | None = None
    ) -> R:
        """``store.write(work)`` with the audit of its result inserted after its statements."""

        async def audited(conn: AsyncConnection) -> R:
            result = await work(conn)
            await self.insert(conn, result)
            return result

        self.written = ()
        result = await store.write(audited, what=what, isolation=isolation)
        self.done()
        return result


async def record(store: Store, batch: Sequence[Event]) -> None:
    """Append ``batch`` in its own transaction."""
    if not batch:
        return

    async def work(conn: AsyncConnection) -> None:
        await insert_events(conn, batch)

    await store.write(work, what="record events")


async def read(
    store: Store,
    *,
    namespace: str | None = None,
    subject: str | None = None,
    kind: str | None = None,
    after_id: int = 0,
    limit: int = 100,
    newest_first: bool = False,
    before_id: int | None = None,
) -> list[RecordedEvent]:
    """Events with ``after_id`` < id (< ``before_id``) matching the filters, oldest first unless
    ``newest_first`` (the primary key orders both ways, so neither sorts)."""
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit: must be between 1 and {MAX_LIMIT}, got {limit}")
    t = events_table
    order = t.c.id.desc() if newest_first else t.c.id
    query = sa.select(t).where(t.c.id > after_id).order_by(order).limit(limit)
    if before_id is not None:
        query = query.where(t.c.id < before_id)
    if namespace is not None:
        query = query.where(t.c.namespace == namespace)
    if subject is not None:
        query = query.where(t.c.subject == subject)
    if kind is not None:
        query = query.where(t.c.kind == kind)

    async def work(conn: AsyncConnection) -> list[RecordedEvent]:
        rows = (await conn.execute(query)).mappings()
        return [
            RecordedEvent(
                id=int(r["id"]),
                event=Event(
                    kind=r["kind"],
                    at=instant(r["at"]),
                    subject=r["subject"],
                    namespace=r["namespace"],
                    level=Level(r["level"]),
                    data=dict(r["data"] or {}),
                ),
            )
            for r in rows
        ]

    return await store.read_one(work, what="read events")


class SqlEventSink:
    """An EventSink that appends to the ledger's events table; a failure is logged, not raised.

    Events a change already committed in its own transaction (:class:`Audited`) are skipped
    once: the service still emits them (to its logs and any other sink it fans out to), and this
    sink is usually one of those. They are known by identity, held weakly so an event never
    emitted is not kept. What reaches the table through here is only what records no change (a
    refusal, a failure report): best-effort, by decision (docs/decisions.md).
    """

    def __init__(self, store: Store) -> None:
        self._store = store
        self._committed: weakref.WeakValueDictionary[int, Event] = weakref.WeakValueDictionary()

    def committed(self, batch: Sequence[Event]) -> None:
        """Note that ``batch`` is in the table already (written by the change that made it)."""
        for event in batch:
            self._committed[id(event)] = event

    async def emit(self, events: Sequence[Event]) -> None:
        """Append the events not yet recorded; never raises (an audit failure is logged)."""
        fresh = [e for e in events if self._committed.pop(id(e), None) is not e]
        try:
            await record(self._store, fresh)
        except Exception:
            _log.exception("could not record %d event(s) in the audit table", len(fresh))
