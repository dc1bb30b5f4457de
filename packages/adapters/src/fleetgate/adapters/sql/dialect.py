"""What differs between the databases, as one small interface each dialect plugin implements.

The ledger is one implementation for every backend; everything backend-specific (engine
arguments, per-connection setup, which errors are worth retrying, serialising migrations) lives
behind this interface in ``plugin_sqlite``, ``plugin_mariadb`` and ``plugin_postgres``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine


class DialectSupport:
    """Defaults suit a server database; subclasses override what their backend needs."""

    #: Short backend name used in messages and metrics ("sqlite", "mariadb", "postgres").
    name = "sql"
    #: Queue this process's writers in memory instead of in the database's lock (SQLite has one
    #: writer anyway; waiting on an asyncio lock beats its busy handler's sleep-and-poll).
    serialize_writers = False

    def engine_kwargs(self, options: dict[str, Any]) -> dict[str, Any]:
        """Extra keyword arguments for ``create_async_engine``."""
        return {"pool_pre_ping": True}

    def install(self, engine: AsyncEngine, options: dict[str, Any]) -> None:
        """Attach per-connection setup (event listeners) to a freshly created engine."""

    def retryable(self, error: DBAPIError) -> bool:
        """True for errors that mean "run the whole transaction again" (deadlock, busy...)."""
        return False

    def connection_lost(self, error: Exception) -> bool:
        """True for a non-DBAPI error that means the driver's connection is gone.

        SQLAlchemy wraps the driver's own errors, but not everything a driver raises after its
        connection was closed under it; such an error must still reach the caller as
        ``LedgerUnavailable``, like any other lost connection.
        """
        return False

    def lock_for_migration(self, connection: Connection) -> None:
        """Serialise concurrent migrations (several workers starting at once)."""

    def unlock_after_migration(self, connection: Connection) -> None:
        """Undo ``lock_for_migration`` where the lock outlives the transaction."""


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
