"""What differs between the databases, as one small interface each dialect plugin implements.

The ledger is one implementation for every backend; everything backend-specific (the URL schemes
served, engine arguments, per-connection setup, which errors are worth retrying, serialising
migrations, how a reconcile pass groups and writes back its rows, whether the admission runs in
a stored function) lives behind this interface, in one room per dialect: ``sqlite``, ``mariadb``
and ``postgres`` (each a package whose ``plugin`` module holds its ``DialectSupport`` subclass and
whatever only that database needs). This module is the interface alone: it builds nothing that
uses it. Each room's ``plugin`` (an instance of its subclass of ``ledger_plugin.LedgerPlugin``)
is also its pluggy plugin, through its entry point: the two ledger hooks are written once, there.
A new dialect is one such room, its entry point and its test backend (``tests/backends.py``);
``tests/adapters/sql/test_dialect_in_one_place.py`` keeps it so.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, DisconnectionError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql.elements import ColumnElement

from fleetgate.adapters.sql import node_writes
from fleetgate.adapters.sql.batch_items import BatchItem, ItemResult
from fleetgate.domain.capacity.claims import ClaimEnforcement
from fleetgate.domain.capacity.model import Admission, AdmitRequest
from fleetgate.domain.capacity.reconcile import NodeResult
from fleetgate.domain.ports import Audit

#: Seconds a pooled connection may sit idle and still be handed out without a liveness ping.
DEFAULT_PING_IDLE_SECONDS = 5.0
_IDLE_SINCE = "fleetgate_idle_since"
#: Execution option the store sets on a read-only transaction; a dialect that issues its own
#: BEGIN (SQLite) reads it to begin a plain, deferred transaction instead of a writer's.
READ_ONLY = "fleetgate_read_only"


@dataclass(frozen=True)
class Timeouts:
    """Bounds on the waits for the database (seconds), from ``options["timeouts"]``.

    A database that goes away must cost a request seconds, not the minutes a driver's default
    would wait for a silent host: opening a connection, waiting for a pooled one, and one
    statement are each bounded, and each overrun is ``LedgerUnavailable`` (503). ``answer``
    bounds, on the client and for every dialect that can fall silent, each wait of a ledger
    transaction for the database's answer (``answers.py``): a silent database is a 503 within
    it on every path, whatever the driver would wait. The connect and pool bounds stay below
    it, so that their own, truer messages come first (a host that does not answer, a pool
    exhausted by a busy database); ``statement`` is the server's bound on one statement (and,
    on PostgreSQL, the client's outside a transaction: migrations).
    """

    connect: float = 3.0
    pool: float = 3.0
    statement: float = 10.0
    answer: float = 4.0

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> Timeouts:
        """``{"connect_seconds": .., "pool_seconds": .., "statement_seconds": ..}``, checked."""
        raw = dict(options.get("timeouts") or {})
        values = {}
        for name in ("connect", "pool", "statement", "answer"):
            value = raw.pop(f"{name}_seconds", getattr(cls, name))
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ValueError(f"timeouts.{name}_seconds: must be a number > 0, got {value!r}")
            values[name] = float(value)
        if raw:
            raise ValueError(f"timeouts: unknown option(s) {', '.join(sorted(raw))}")
        return cls(**values)


class DialectSupport:
    """Defaults suit a server database; subclasses override what their backend needs.

    An instance holds no state of its own: a plugin's one instance serves every ledger it makes.
    """

    #: Short backend name used in messages and metrics ("sqlite", "mariadb", "postgres"); for
    #: messages only: behaviour is chosen by overriding, never by comparing this name.
    name = "sql"
    #: The SQLAlchemy URL schemes this dialect serves (``"postgresql+asyncpg"``...).
    schemes: tuple[str, ...] = ()
    #: Queue this process's writers in memory instead of in the database's lock (SQLite has one
    #: writer anyway; waiting on an asyncio lock beats its busy handler's sleep-and-poll).
    serialize_writers = False
    #: Set once a connection found the server to be a node of a multi-primary cluster (Galera's
    #: ``wsrep_on=ON``): certification conflicts are then common and the retry budget grows.
    multi_primary = False
    #: The name of the database's admission function (PostgreSQL's ``fleetgate_admit``, with its
    #: batch form): the ledger admits in one call where it is installed and current (the
    #: methods under "the admission in one call"). None: the database has none.
    admission_function: str | None = None
    #: A statement outside an explicit transaction is its own transaction, with nothing else
    #: to send: a one-statement read then needs no BEGIN and COMMIT round trips (``read_one``).
    #: Alone in its transaction, one statement sees the same at every isolation level.
    autocommit_reads = False
    #: A server can fall silent (connections open, nothing answers): bound each wait of a
    #: transaction on the client (``Timeouts.answer``). A local file answers or fails.
    bound_answers = True

    # --- the engine ---------------------------------------------------------------------------

    def engine_kwargs(self, options: dict[str, Any]) -> dict[str, Any]:
        """Extra keyword arguments for ``create_async_engine``."""
        return {}

    def bound_waits(self, url: str, kwargs: dict[str, Any], timeouts: Timeouts) -> None:
        """Add the timeouts to ``create_async_engine``'s arguments: here the pool's checkout."""
        kwargs["pool_timeout"] = timeouts.pool

    def install(self, engine: AsyncEngine, options: dict[str, Any]) -> None:
        """Attach per-connection setup (event listeners) to a freshly created engine."""
        ping_when_idle(engine, float(options.get("ping_idle_seconds", DEFAULT_PING_IDLE_SECONDS)))

    def retryable(self, error: DBAPIError) -> bool:
        """True for errors that mean "run the whole transaction again" (deadlock, busy...)."""
        return False

    def unavailable(self, error: DBAPIError) -> bool:
        """True for an error that says the database cannot serve us now, whatever its class.

        The server refused the connection or the session (database dropped, access revoked,
        shutting down, too many connections), or the connection broke: the request is
        answered "unavailable" (503), never as a bug. The drivers report some of these with
        their generic error class, not OperationalError, so each dialect lists its codes.
        """
        return False

    def connection_lost(self, error: Exception) -> bool:
        """True for a non-DBAPI error that means the driver's connection is gone.

        SQLAlchemy wraps the driver's own errors, but not everything a driver raises after its
        connection was closed under it; such an error must still reach the caller as
        ``LedgerUnavailable``, like any other lost connection.
        """
        return False

    async def bound_batch_waits(self, conn: AsyncConnection) -> None:
        """Bound each lock wait of a group-commit batch, where the database would wait long.

        A batch takes its items' rows one item after another, so it holds one item's node
        while it waits for the next item's claim or cluster row: out of the canonical order,
        and a cycle with a concurrent release or claim write is possible. A database that
        detects the cycle at once (InnoDB) or has one writer (SQLite) needs nothing here.
        """

    def lock_for_migration(self, connection: Connection) -> None:
        """Serialise concurrent migrations (several workers starting at once)."""

    def unlock_after_migration(self, connection: Connection) -> None:
        """Undo ``lock_for_migration`` where the lock outlives the transaction."""

    def node_local_locks(self, connection: Connection) -> bool:
        """True when this server's locks bind only its own node of a multi-primary cluster.

        Then a lock that must hold cluster-wide (the migration lock) has to be a row written in
        a transaction, which every node certifies, instead of a server lock.
        """
        return False

    def snapshot_options(self) -> dict[str, Any]:
        """Execution options of a read-only transaction whose statements see one snapshot.

        REPEATABLE READ on a server (a consistency check reads many tables while writers run).
        """
        return {"isolation_level": "REPEATABLE READ"}

    # --- the admission in one call (a dialect with an ``admission_function``) -------------------
    # Generic code reaches a stored admission only through these methods, never by its module.

    async def admission_function_current(self, conn: AsyncConnection) -> bool:
        """Whether the admission function is installed by this code (a stale one is not used)."""
        return False

    async def batch_function_current(self, conn: AsyncConnection) -> bool:
        """Whether the admission function's batch form is installed by this code too."""
        return False

    async def admit_by_function(
        self,
        conn: AsyncConnection,
        request: AdmitRequest,
        placement_id: str,
        now: float,
        enforcement: ClaimEnforcement,
        audit: Audit | None = None,
    ) -> Admission:
        """One enforced admission as one call of the admission function (as ``admit_in``)."""
        raise NotImplementedError(f"{self.name} has no admission function")

    async def admit_batch_by_function(
        self,
        conn: AsyncConnection,
        items: Sequence[BatchItem],
        now: float,
        enforcement: ClaimEnforcement,
    ) -> list[ItemResult]:
        """A batch's items in one call of the batch function (a ``BatchExecutor``)."""
        raise NotImplementedError(f"{self.name} has no batch admission function")

    # --- the reconcile pass's set-based statements ----------------------------------------------

    def grouping(self, column: ColumnElement[str]) -> ColumnElement[str]:
        """What a whole-table ``GROUP BY column`` groups by: the column itself, here."""
        return column

    async def write_node_counters(
        self, conn: AsyncConnection, rows: list[NodeResult], now: float
    ) -> None:
        """Write a pass's recomputed node counters: one batched UPDATE by name, here.

        A server dialect whose driver sends a batched UPDATE as one round trip per row writes
        them set-based instead (see ``node_writes``).
        """
        await node_writes.update_each(conn, rows, now)


def ping_when_idle(engine: AsyncEngine, idle_seconds: float) -> None:
    """Check a pooled connection's liveness at checkout, but only after it sat idle a while.

    ``pool_pre_ping`` pings on every checkout: on PostgreSQL (asyncpg) that is BEGIN, an empty
    query and ROLLBACK, three round trips, on MariaDB one, paid by every transaction, twice the
    round trips of the admission's own statements on PostgreSQL. A connection that was in use a
    moment ago is as good as a ping's answer, so only one that sat idle longer than
    ``idle_seconds`` is pinged; a dead one is replaced by the pool before it is handed out
    (SQLAlchemy's documented use of ``DisconnectionError`` in a checkout handler). A connection
    that dies while it is checked out fails its transaction with ``LedgerUnavailable``, as
    before; SQLAlchemy then retires every connection opened before it, so a database restart
    costs at most the requests in flight.
    """
    pool = engine.sync_engine.pool
    dialect = engine.sync_engine.dialect

    @event.listens_for(pool, "checkin")
    def _on_checkin(_dbapi_connection: Any, record: Any) -> None:
        if record is not None:
            record.info[_IDLE_SINCE] = time.monotonic()

    @event.listens_for(pool, "checkout")
    def _on_checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get(_IDLE_SINCE)
        if since is None or time.monotonic() - since <= idle_seconds:
            return  # new, or used a moment ago
        try:
            alive = dialect.do_ping(dbapi_connection)
        except dialect.loaded_dbapi.Error as exc:
            if dialect.is_disconnect(exc, dbapi_connection, None):
                raise DisconnectionError(str(exc)) from exc
            raise
        if not alive:  # pragma: no cover - do_ping raises or returns True for our drivers
            raise DisconnectionError("liveness ping failed")


def error_code(error: DBAPIError) -> int | str | None:
    """The driver's error code: MySQL errno, PostgreSQL SQLSTATE, or SQLite's extended code."""
    orig = error.orig
    # The MySQL errno first: PyMySQL also sets ``sqlstate`` from the server's error packet
    # ("40001" for a deadlock), which would hide the errno the MariaDB plugin matches on.
    args = getattr(orig, "args", ())
    if args and isinstance(args[0], int):
        return args[0]
    for attr in ("sqlstate", "pgcode", "sqlite_errorcode"):
        value = getattr(orig, attr, None)
        if value is not None:
            return value  # type: ignore[no-any-return]
    return None
