"""The ledger's connection to its database: engine, clock, and the transaction runner.

Every ledger operation goes through :meth:`Store.write` or :meth:`Store.read`: one transaction,
run whole again on a retryable conflict, with connection-level failures turned into
``LedgerUnavailable``. The modules that implement operations receive the ``Store`` and never
build engines or transactions of their own.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError, PendingRollbackError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from fleetgate.adapters.clock import SystemClock
from fleetgate.adapters.sql import answers
from fleetgate.adapters.sql.answers import COMMIT, AnswerWatch, Availability, NotAnswering
from fleetgate.adapters.sql.dialect import READ_ONLY, DialectSupport, Timeouts
from fleetgate.adapters.sql.retry import (
    BASE_DELAY,
    DEADLINE,
    MAX_ATTEMPTS,
    MAX_DELAY,
    RetryBudget,
    with_retries,
)
from fleetgate.adapters.sql.sqltypes import epoch
from fleetgate.adapters.urlredaction import redact_urls
from fleetgate.domain.capacity.errors import LedgerUnavailable
from fleetgate.domain.ports import Clock

T = TypeVar("T")
Work = Callable[[AsyncConnection], Awaitable[T]]


class CommitUnknown(NotAnswering):
    """The COMMIT failed short of a refusal (mostly: the connection was lost during it).

    Whether the transaction committed is then unknown, so nothing may run it again.
    """


def _string_form(value: object) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value)


def json_text(value: object) -> str:
    """The text a JSON column stores: domain values (datetimes, enums...) as their strings.

    The engine's one JSON serializer (every dialect's JSON type calls it), so an event's data
    is serialized once, as it is bound, with no plain copy made of it first.
    """
    return json.dumps(value, default=_string_form)


def _commit_unknown(what: str, failure: str, cause: BaseException | None) -> CommitUnknown:
    because = f": {cause}" if cause is not None and str(cause) else ""
    return CommitUnknown(f"{what}: {failure}, so whether it committed is unknown{because}")


def _unreachable(exc: OSError | TimeoutError, watch: AnswerWatch) -> str:
    """Why the database could not be used, never an empty reason: a driver's own timeout
    (asyncpg's per statement, the connect's) says nothing of itself, so the wait is named."""
    if isinstance(exc, TimeoutError) and not str(exc):
        return f"the database did not answer {watch.waiting_for} within its configured wait"
    return f"cannot reach the database: {exc}"


#: Connections a process keeps open, and those it may open beyond them under a burst, unless
#: configured (``options["pool"]``). SQLAlchemy's own 5 + 10 made a steady load of 32 requests
#: open and close sessions all the time (issue 30).
DEFAULT_POOL_SIZE = 16
DEFAULT_POOL_OVERFLOW = 16


def pool_sizes(options: dict[str, Any]) -> dict[str, int]:
    """``create_async_engine``'s pool size arguments from ``options["pool"]``."""
    pool = options.get("pool") or {}
    return {
        "pool_size": int(pool.get("size", DEFAULT_POOL_SIZE)),
        "max_overflow": int(pool.get("overflow", DEFAULT_POOL_OVERFLOW)),
    }


class Store:
    """An engine bound to a dialect's quirks and a clock; runs transactions with retries."""

    def __init__(
        self,
        url: str,
        options: dict[str, Any],
        dialect: DialectSupport,
        clock: Clock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.url = url
        self.options = options
        self.dialect = dialect
        self.clock: Clock = clock or SystemClock()
        self.rng = rng or random.Random()
        retry = dict(options.get("retry") or {})
        base = float(retry.get("base_delay_ms", BASE_DELAY * 1000)) / 1000
        self.single_budget = RetryBudget(
            attempts=int(retry.get("attempts", MAX_ATTEMPTS)),
            base=base,
            deadline=float(retry.get("deadline_seconds", DEADLINE)),
            cap=float(retry.get("max_delay_ms", MAX_DELAY * 1000)) / 1000,
        )
        self.multi_budget = RetryBudget.multi_primary(
            deadline=float(retry.get("multi_primary_deadline_seconds", DEADLINE)),
            base=base,
            cap=float(retry.get("multi_primary_max_delay_ms", MAX_DELAY * 1000)) / 1000,
        )
        #: "auto": the deadline budget once the server reports itself a multi-primary node.
        self.multi_primary_mode = str(retry.get("multi_primary", "auto"))
        self.serialize_multi_primary = bool(retry.get("multi_primary_serialize_writers", True))
        self._engine: AsyncEngine | None = None
        self._writers = asyncio.Lock()
        #: Each wait for an answer within a transaction, bounded on the client (answers.py);
        #: None where the dialect's own waits are bounded (SQLite's busy timeout). Read with
        #: the other timeouts, when the engine is made.
        self.answer_seconds: float | None = None
        self.availability = Availability(f"at {redact_urls(url)}")

    @property
    def engine(self) -> AsyncEngine:
        """The engine, created on first use (creating one does not connect)."""
        if self._engine is None:
            kwargs = {"json_serializer": json_text, **self.dialect.engine_kwargs(self.options)}
            timeouts = Timeouts.from_options(self.options)
            self.dialect.bound_waits(self.url, kwargs, timeouts)
            self.answer_seconds = timeouts.answer if self.dialect.bound_answers else None
            if "pool_timeout" in kwargs:  # a queue pool: a database in memory has one connection
                kwargs.update(pool_sizes(self.options))
            kwargs.update(self.options.get("engine", {}))
            self._engine = create_async_engine(self.url, **kwargs)
            self.dialect.install(self._engine, self.options)
            if self.answer_seconds is not None:  # nothing to tell a watch without a bound
                answers.listen(self._engine)
        return self._engine

    @property
    def started(self) -> bool:
        """True once an engine exists."""
        return self._engine is not None

    async def dispose(self) -> None:
        """Close every pooled connection; the next use makes a new engine."""
        if self._engine is not None:
            engine, self._engine = self._engine, None
            await engine.dispose()

    def now(self) -> datetime:
        """The current instant from the ledger's clock."""
        return self.clock.now()

    def now_epoch(self) -> float:
        """The current instant as stored: epoch seconds."""
        return epoch(self.clock.now())

    async def write(
        self, work: Work[T], *, what: str, isolation: str | None = None, retry: bool = True
    ) -> T:
        """Run ``work`` in one writing transaction (BEGIN IMMEDIATE on SQLite), with retries.

        ``isolation`` (e.g. ``"READ COMMITTED"``) is the level the transaction runs at on the
        server databases; SQLite, which has one writer at a time, ignores it. ``retry=False``
        runs it once and raises what made it fail as it is (a retryable ``DBAPIError``, a lost
        connection before the COMMIT); any failure of the COMMIT itself other than the server's
        refusal (serialization failure, deadlock) is always :class:`CommitUnknown`. Group commit
        runs its batches so, and splits a failed one.
        """
        if self.dialect.serialize_writers:
            async with self._writers:
                return await self._run(work, what=what, read_only=False, retry=retry)
        if self._serialize_for_certification():
            async with self._writers:
                return await self._run(
                    work, what=what, read_only=False, isolation=isolation, retry=retry
                )
        return await self._run(work, what=what, read_only=False, isolation=isolation, retry=retry)

    async def read(self, work: Work[T], *, what: str) -> T:
        """Run ``work`` in one read-only transaction, with retries."""
        return await self._run(work, what=what, read_only=True)

    async def read_one(self, work: Work[T], *, what: str) -> T:
        """Run ``work``, which sends exactly one statement, as a read, with retries.

        Where the dialect allows it (``autocommit_reads``: PostgreSQL) the statement runs as its
        own transaction, without the BEGIN and COMMIT round trips of ``read``; it sees what one
        statement of a READ COMMITTED transaction would. Nothing is written, so a lost
        connection is retried as any read's.
        """
        return await self._run(
            work, what=what, read_only=True, autocommit=self.dialect.autocommit_reads
        )

    async def _run(
        self,
        work: Work[T],
        *,
        what: str,
        read_only: bool,
        isolation: str | None = None,
        retry: bool = True,
        autocommit: bool = False,
    ) -> T:
        async def once() -> T:
            watch = self._answer_watch()
            try:
                async with watch:
                    return await attempt(watch)
            except TimeoutError as exc:
                if not watch.expired:
                    raise
                # A wait went unanswered past the bound: the attempt was cancelled there and
                # SQLAlchemy discarded its connection. Never run again: it would wait as long.
                if watch.waiting_for == COMMIT and not read_only:
                    raise _commit_unknown(what, watch.describe(), None) from exc
                raise NotAnswering(f"{what}: {watch.describe()}") from exc

        async def attempt(watch: AnswerWatch) -> T:
            committing = False
            try:
                async with self.engine.connect() as conn:
                    if read_only:
                        conn = await conn.execution_options(**{READ_ONLY: True})
                    if isolation is not None:
                        conn = await conn.execution_options(isolation_level=isolation)
                    if autocommit:  # a read of one statement (read_one): never a write
                        conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
                    try:
                        async with conn.begin():
                            result = await work(conn)
                            # The COMMIT is sent when this block ends. A read's has nothing to
                            # lose: one failing at its COMMIT is run again like any other.
                            committing = not read_only
                        return result
                    except BaseException as exc:
                        timed_out = isinstance(exc, OSError | TimeoutError)
                        if (
                            (committing or timed_out)
                            and not conn.invalidated
                            and not self._refused(exc)
                        ):
                            # The COMMIT failed short of a refusal, or the driver gave up waiting
                            # on the socket: whatever the connection's state, it is never handed
                            # out again (its reset would meet a dead socket, or a transaction
                            # the server still holds open).
                            await conn.invalidate()
                        if isinstance(exc, PendingRollbackError):
                            # Work went on with a connection SQLAlchemy had discarded: the
                            # server rolled its transaction back, so it is a lost connection.
                            raise NotAnswering(
                                f"{what}: lost the database connection: {exc}"
                            ) from exc
                        if not isinstance(exc, ValueError) or not self.dialect.connection_lost(exc):
                            raise
                        # Not wrapped by SQLAlchemy, so the pool would hand the dead
                        # connection out again: drop it here.
                        if not conn.invalidated:
                            await conn.invalidate()
                        if committing:
                            raise _commit_unknown(
                                what, "lost the database connection during commit", exc
                            ) from exc
                        raise NotAnswering(f"{what}: lost the database connection: {exc}") from exc
            except DBAPIError as exc:
                if self.dialect.retryable(exc):
                    raise  # a refusal the server answered with: nothing committed
                if committing:
                    # Any other failure of the COMMIT is ambiguous, whatever its class: asyncpg
                    # reports a termination that reached it mid-COMMIT as an InternalError
                    # ("cannot switch to state..."). Running the work again could place twice.
                    failure = (
                        "lost the database connection during commit"
                        if exc.connection_invalidated
                        else "the database failed during commit"
                    )
                    raise _commit_unknown(what, failure, exc.orig) from exc
                if exc.connection_invalidated:
                    raise  # rolled back by the server: with_retries runs it on a fresh connection
                if isinstance(exc, OperationalError | InterfaceError) or self.dialect.unavailable(
                    exc
                ):
                    raise NotAnswering(f"{what}: database error: {exc.orig}") from exc
                raise
            except PoolTimeout as exc:
                # Every pooled connection stayed busy past the pool's timeout: nothing ran.
                raise LedgerUnavailable(f"{what}: no free database connection: {exc}") from exc
            except (OSError, TimeoutError) as exc:
                if committing:
                    raise _commit_unknown(what, _unreachable(exc, watch), exc) from exc
                raise NotAnswering(f"{what}: {_unreachable(exc, watch)}") from exc

        try:
            if not retry:
                result = await once()
            else:
                result = await with_retries(
                    once, retryable=self._retryable, what=what, budget=self.budget(), rng=self.rng
                )
        except NotAnswering as exc:
            self.availability.lost(str(exc))
            raise
        self.availability.answered()
        return result

    def _answer_watch(self) -> AnswerWatch:
        """A watch over one attempt, with the bound read when the engine was made."""
        if self._engine is None:
            _ = self.engine
        return AnswerWatch(self.answer_seconds)

    def _serialize_for_certification(self) -> bool:
        """On a multi-primary cluster, one writing transaction of this process at a time.

        They all write the cluster row, so on one node they would queue on its lock anyway;
        in flight together they only widen the window in which another node's commit aborts
        them (certification, brute-force abort), and every abort costs a retry. Admissions
        that arrive meanwhile join the next group-commit batch.
        """
        return self.serialize_multi_primary and self.budget() is self.multi_budget

    def budget(self) -> RetryBudget:
        """The retry budget now: by deadline on a multi-primary cluster, else fixed attempts."""
        mode = self.multi_primary_mode
        if mode == "on" or (mode == "auto" and self.dialect.multi_primary):
            return self.multi_budget
        return self.single_budget

    def _retryable(self, error: DBAPIError) -> bool:
        return self.dialect.retryable(error)

    def _refused(self, error: BaseException) -> bool:
        """The server's refusal (deadlock, serialization failure): the connection is sound."""
        return isinstance(error, DBAPIError) and self.dialect.retryable(error)
