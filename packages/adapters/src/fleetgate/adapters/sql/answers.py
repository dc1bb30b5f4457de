"""Every wait of a ledger transaction for the database's answer, bounded on the client; and one
log line when the database stops answering, one when it answers again.

A database can fall silent: the connections stay open and nothing answers (a frozen server, a
network that drops packets, a proxy that hangs). The driver's own bounds do not cover every wait:
aiomysql has no read timeout at all, and a pooled connection's liveness ping, a statement and
the COMMIT each wait as long as the driver lets them. So each transaction attempt runs under an
asyncio deadline (:class:`AnswerWatch`) of ``database_timeouts.answer_seconds``, counted afresh
whenever the database is asked something new (a connection handed out, a statement sent, the
COMMIT sent): a transaction that keeps being answered is never cut, one wait left unanswered
that long is. SQLAlchemy discards a connection whose await was cancelled (it never returns to the
pool), and the store answers ``LedgerUnavailable`` naming the wait: a 503 within the bound.

The engine's events say when a new wait starts (``listen``), and so does a dialect that tries
several hosts in turn (``asked``); a context variable carries the attempt's watch to them
(SQLAlchemy runs the driver's awaits in a greenlet that shares the task's context). The other
bounds stay below this one by default (``Timeouts``), so a pool exhausted by a busy but healthy
database is "no free database connection", not a database lost, and a dead first host of
several costs its connect bound and leaves the next host the whole of this one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from contextvars import ContextVar
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from fleetgate.domain.capacity.errors import LedgerUnavailable

_log = logging.getLogger("fleetgate.ledger")

#: What an attempt waits for, as its messages name it.
CONNECTION, STATEMENT, COMMIT = "a connection", "a statement's result", "the COMMIT"


class NotAnswering(LedgerUnavailable):
    """The database did not answer, could not be reached, or lost the connection: what the
    log reports as the database lost (a conflict the server kept answering with is not)."""


_current: ContextVar[AnswerWatch | None] = ContextVar("fleetgate_answer_watch", default=None)


#: Seconds between cancellations once the bound has passed: the cleanup after the first one
#: may wait on the same silent socket (asyncpg's ping rolls back in a ``finally``, a closing
#: connection says goodbye for up to 2 s), and each further cancellation cuts that short.
RECANCEL_SECONDS = 0.25


class AnswerWatch:
    """One transaction attempt's deadline for each answer of the database (None: unbounded).

    ``async with`` it around the attempt; when a wait runs past the bound the attempt is
    cancelled (again every ``RECANCEL_SECONDS`` until it has ended) and the block raises
    ``TimeoutError``, with :attr:`expired` set. Like ``asyncio.timeout``, but a timeout that
    also bounds the cleanup, and whose every new wait starts the count afresh.
    """

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.waiting_for = CONNECTION
        self.expired = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._deadline = 0.0
        self._inside = False
        self._cancels = 0
        self._cancelling = 0
        self._token: Any = None

    async def __aenter__(self) -> AnswerWatch:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        assert self._task is not None
        self._cancelling = self._task.cancelling()
        self._inside = True
        if self.seconds is not None:
            self._deadline = self._loop.time() + self.seconds
            self._handle = self._loop.call_at(self._deadline, self._check)
        self._token = _current.set(self)
        return self

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, _tb: Any) -> None:
        self._inside = False
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        _current.reset(self._token)
        if not self.expired or exc_type is None:
            return
        assert self._task is not None
        for _ in range(self._cancels):
            self._task.uncancel()
        if self._task.cancelling() > self._cancelling:
            return  # cancelled from outside as well (shutting down): that wins
        raise TimeoutError(self.describe()) from exc

    def _check(self) -> None:
        """The timer: at the deadline (unless a new wait moved it on), cancel the attempt."""
        assert self._loop is not None and self._task is not None
        self._handle = None
        if not self._inside:
            return
        now = self._loop.time()
        if not self.expired and now < self._deadline:  # asked again meanwhile: wait on
            self._handle = self._loop.call_at(self._deadline, self._check)
            return
        self.expired = True
        self._cancels += 1
        self._task.cancel()
        self._handle = self._loop.call_at(now + RECANCEL_SECONDS, self._check)

    def asked(self, waiting_for: str) -> None:
        """A new wait begins: it gets the whole bound (none once the bound has passed: that
        is the cleanup's wait, which the cancellations cut short). Only moves the deadline:
        the timer reads it when it fires, so a statement costs no timer of its own."""
        if self.expired or self._loop is None or self.seconds is None:
            return
        self.waiting_for = waiting_for
        self._deadline = self._loop.time() + self.seconds

    def describe(self) -> str:
        """``the database did not answer <the wait> within N s``, for the attempt's error."""
        return f"the database did not answer {self.waiting_for} within {self.seconds:g} s"


def asked(waiting_for: str) -> None:
    """Tell the current attempt's watch (if any) that a new wait on the database begins."""
    watch = _current.get()
    if watch is not None:
        watch.asked(waiting_for)


def listen(engine: AsyncEngine) -> None:
    """Tell the current attempt's watch whenever the engine sends the database something new.

    Getting a connection (the pool's wait, a new connection's handshake, a pooled one's
    liveness ping) is one wait from the attempt's start: the pool handing one out is no answer
    of the database, so it does not start the count again.
    """

    @event.listens_for(engine.sync_engine, "before_cursor_execute")
    def _statement(*_: Any) -> None:
        asked(STATEMENT)

    @event.listens_for(engine.sync_engine, "commit")
    def _commit(*_: Any) -> None:
        asked(COMMIT)


class Availability:
    """Whether the database answers, as the log says it: a WARNING when it stops, an INFO when
    it answers again (one line per change, not one per failed request)."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.lost_since: float | None = None

    def lost(self, reason: str) -> None:
        """A transaction failed because the database did not answer or could not be reached."""
        if self.lost_since is None:
            self.lost_since = time.monotonic()
            _log.warning(
                "lost the database %s: %s; requests are answered 503 until it answers again",
                self.where,
                reason,
            )

    def answered(self) -> None:
        """A transaction completed: the database answers."""
        if self.lost_since is not None:
            down = time.monotonic() - self.lost_since
            self.lost_since = None
            _log.info("the database %s answers again (after %.1f s)", self.where, down)
