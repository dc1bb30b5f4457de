"""The SQLite (the embedded default) ledger plugin: serves ``sqlite+aiosqlite://`` database URLs.

SQLite allows one writer at a time. A transaction that starts reading and later writes can fail
with SQLITE_BUSY however long the busy timeout is, so every ledger transaction opens with
``BEGIN IMMEDIATE``: it takes the write lock up front (waiting up to the busy timeout), after
which its guarded UPDATEs cannot be interrupted. Read-only transactions use a plain ``BEGIN``.
This is SQLAlchemy's documented recipe: turn off the driver's own BEGIN, emit ours on "begin".
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event, make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql.elements import ColumnElement

from fleetgate.adapters.sql.dialect import READ_ONLY, Timeouts
from fleetgate.adapters.sql.ledger_plugin import LedgerPlugin

#: Milliseconds a connection waits for the write lock before SQLITE_BUSY.
DEFAULT_BUSY_TIMEOUT_MS = 5000
#: What aiosqlite raises (a bare ValueError) for work queued on a connection that was closed.
_CLOSED = ("Connection closed", "no active connection")
#: Primary result codes that mean the file cannot serve us now: I/O error (the file or its
#: directory removed, the disk gone), cannot open, read-only (a moved or deleted file), full,
#: not a database (replaced), corrupt.
_UNAVAILABLE = frozenset(
    {
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_NOTADB,
        sqlite3.SQLITE_CORRUPT,
    }
)


class SqliteSupport(LedgerPlugin):
    """BEGIN IMMEDIATE for writers, WAL so readers never block, foreign keys on, busy timeout."""

    name = "sqlite"
    schemes = ("sqlite+aiosqlite",)
    serialize_writers = True
    #: A local file answers or fails; a wait for its lock is the busy timeout's. (aiosqlite
    #: runs each call in a thread, which a cancelled await would leave running.)
    bound_answers = False

    def engine_kwargs(self, options: dict[str, Any]) -> dict[str, Any]:
        """No pre-ping: the file is local."""
        return {}

    def bound_waits(self, url: str, kwargs: dict[str, Any], timeouts: Timeouts) -> None:
        """The pool's checkout only, for a file (a database in memory has a one-connection pool).

        Opening a local file does not wait, and the busy timeout bounds a wait for the lock.
        """
        database = make_url(url).database
        if database in (None, "", ":memory:") or str(database).startswith("file:"):
            return
        super().bound_waits(url, kwargs, timeouts)

    def install(self, engine: AsyncEngine, options: dict[str, Any]) -> None:
        """Register the connect and begin listeners on the engine."""
        busy_ms = int(options.get("busy_timeout_ms", DEFAULT_BUSY_TIMEOUT_MS))
        memory = engine.url.database in (None, "", ":memory:")
        if not memory and not str(engine.url.database).startswith("file:"):
            # The embedded default lives in ./.fleetgate/: create the directory on first use.
            Path(str(engine.url.database)).parent.mkdir(parents=True, exist_ok=True)

        @event.listens_for(engine.sync_engine, "connect")
        def _on_connect(dbapi_connection: Any, _record: Any) -> None:
            # Stop the driver from emitting its own BEGIN (and COMMIT before DDL).
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            try:
                cursor.execute(f"PRAGMA busy_timeout = {busy_ms}")
                cursor.execute("PRAGMA foreign_keys = ON")
                if not memory:
                    cursor.execute("PRAGMA journal_mode = WAL")
                    cursor.execute("PRAGMA synchronous = NORMAL")
            finally:
                cursor.close()

        @event.listens_for(engine.sync_engine, "begin")
        def _on_begin(conn: Any) -> None:
            read_only = conn.get_execution_options().get(READ_ONLY, False)
            conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")

        @event.listens_for(engine.sync_engine, "commit")
        def _on_commit(conn: Any) -> None:
            # SQLAlchemy's aiosqlite adapter skips commit() without a word when the connection
            # is already closed, which would report a rolled-back transaction as committed.
            # Refuse to commit on a closed connection instead (the adapter itself reads the
            # same attribute); the store turns this error into LedgerUnavailable. Sending our
            # own COMMIT would do too, at three more thread hops per transaction.
            if conn.connection.driver_connection._connection is None:
                raise ValueError(_CLOSED[0])

    def snapshot_options(self) -> dict[str, Any]:
        """A plain deferred BEGIN: in WAL mode a reader's first read fixes its snapshot."""
        return {READ_ONLY: True}

    def retryable(self, error: DBAPIError) -> bool:
        """SQLITE_BUSY and SQLITE_LOCKED (the write lock was not granted within the timeout)."""
        orig = error.orig
        code = getattr(orig, "sqlite_errorcode", None)
        if code is not None:
            return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
        return "database is locked" in str(orig) or "database table is locked" in str(orig)

    def unavailable(self, error: DBAPIError) -> bool:
        """The file or its directory gone, unreadable or unwritable; the lock never granted."""
        code = getattr(error.orig, "sqlite_errorcode", None)
        if code is None:
            return "unable to open database file" in str(error.orig)
        return code & 0xFF in _UNAVAILABLE or self.retryable(error)

    def connection_lost(self, error: Exception) -> bool:
        """aiosqlite's ValueError for a closed connection (e.g. closing a SELECT's cursor)."""
        return type(error) is ValueError and str(error) in _CLOSED

    def grouping(self, column: ColumnElement[str]) -> ColumnElement[str]:
        """The column cast to TEXT: grouping by the bare indexed column makes SQLite walk its
        index and fetch every row by rowid; one table scan into a temporary B-tree takes about
        half as long."""
        return sa.cast(column, sa.Text())


#: The plugin (entry point ``sqlite``).
plugin = SqliteSupport()
