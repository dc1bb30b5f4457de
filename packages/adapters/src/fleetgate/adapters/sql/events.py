"""The append-only audit trail: writing events, reading them back, and the ledger's EventSink.

An event's ``data`` is bound as it is: the engine's JSON serializer (``engine.json_text``) writes
its domain values (datetimes, enums) as their strings, in one pass.

Events recorded on their own (:func:`record`, the sink) are committed in groups: while one
group's transaction is in flight, every other ``record`` of the ledger queues, and the next
group writes them all in one INSERT and one COMMIT (:class:`EventRecorder`).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from fleetgate.adapters.sql import prepared
from fleetgate.adapters.sql.engine import CommitUnknown, Store, Work
from fleetgate.adapters.sql.schema import events as events_table
from fleetgate.adapters.sql.sqltypes import epoch, instant
from fleetgate.adapters.sql.writer_queue import Waiting, WriterQueue
from fleetgate.domain.capacity.model import RecordedEvent
from fleetgate.domain.events import Event, Level
from fleetgate.domain.ports import AuditOf

MAX_LIMIT = 1000
R = TypeVar("R")
_log = logging.getLogger("fleetgate.ledger.events")


def _row(event: Event) -> dict[str, Any]:
    return {
        "at": epoch(event.at),
        "kind": event.kind[:128],
        "subject": event.subject[:255],
        "namespace": event.namespace,
        "level": event.level.value,
        "data": event.data,
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


#: Callers one group transaction carries at most: a few INSERTs' worth of rows, not one long lock.
MAX_GROUP = 64
#: The writer task's name (it exists only while records are queued or in flight).
WRITER_TASK = "fleetgate-event-commit"
_SHUT_DOWN = "record events: the ledger shut down while these events waited for their group"


class EventRecorder:
    """:func:`record` for concurrent callers: those that queue while a group commits share the
    next group's transaction (group commit for events written on their own).

    A caller returns once its events are committed, or raises what today's :func:`record`
    would. A group of one is :func:`record` itself. A larger group runs once, unretried: if it
    fails, nothing of it committed, and each caller records its own events alone (with the
    retries :func:`record` has), so one caller's bad row never loses another's events, and none
    is written twice. A group whose COMMIT failed short of a refusal is :class:`CommitUnknown`
    to every caller in it, never run again (as :func:`record` answers). A caller that stops
    waiting changes nothing for the others: its events commit with their group or not at all.
    """

    def __init__(self, store: Store, max_group: int = MAX_GROUP) -> None:
        self._store = store
        #: Each caller's answer: True once its group committed, False to record alone.
        self._queue: WriterQueue[Sequence[Event], bool] = WriterQueue(
            self._commit, room=max_group, name=WRITER_TASK, shut_down=_SHUT_DOWN
        )

    async def record(self, batch: Sequence[Event]) -> None:
        """Append ``batch``, in order, with the group the writer takes next."""
        if not batch:
            return
        batch = tuple(batch)
        if not await self._queue.submit(batch):
            await record(self._store, batch)

    async def _commit(self, group: list[Waiting[Sequence[Event], bool]]) -> None:
        if len(group) == 1:
            # Alone: today's path, run by the writer so that callers arriving meanwhile queue.
            try:
                await record(self._store, group[0].item)
            except Exception as exc:
                group[0].fail(exc)
            else:
                group[0].settle(True)
            return
        rows = [e for waiting in group for e in waiting.item]

        async def work(conn: AsyncConnection) -> None:
            await insert_events(conn, rows)

        try:
            await self._store.write(work, what=f"record events of {len(group)}", retry=False)
        except CommitUnknown as exc:
            for waiting in group:
                waiting.fail(exc)
        except Exception as exc:
            # Nothing of the group committed: each caller records its own events alone.
            _log.info("recording a group of %d caller by caller after %s", len(group), exc)
            for waiting in group:
                waiting.settle(False)
        else:
            for waiting in group:
                waiting.settle(True)

    async def close(self) -> None:
        """Let the writer finish what is queued (each caller gets its answer), then return."""
        await self._queue.close()


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

    def __init__(self, recorder: EventRecorder) -> None:
        self._recorder = recorder
        self._committed: weakref.WeakValueDictionary[int, Event] = weakref.WeakValueDictionary()

    def committed(self, batch: Sequence[Event]) -> None:
        """Note that ``batch`` is in the table already (written by the change that made it)."""
        for event in batch:
            self._committed[id(event)] = event

    async def emit(self, events: Sequence[Event]) -> None:
        """Append the events not yet recorded; never raises (an audit failure is logged)."""
        fresh = [e for e in events if self._committed.pop(id(e), None) is not e]
        try:
            await self._recorder.record(fresh)
        except Exception:
            _log.exception("could not record %d event(s) in the audit table", len(fresh))
