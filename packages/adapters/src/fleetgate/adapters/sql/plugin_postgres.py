"""The PostgreSQL ledger plugin: serves ``postgresql+asyncpg://`` database URLs.

PostgreSQL at READ COMMITTED re-evaluates a blocked UPDATE's WHERE on the row's newest version,
which is exactly the guard's semantics; serialization failures (40001) and deadlocks (40P01)
are retried whole.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from fleetgate.adapters.plugins import hookimpl
from fleetgate.adapters.sql.dialect import DialectSupport, error_code
from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.ports import CapacityLedger, Clock

SCHEMES = ["postgresql+asyncpg"]
#: serialization_failure, deadlock_detected.
RETRYABLE = frozenset({"40001", "40P01"})
#: Arbitrary but fixed key of the advisory lock that serialises migrations.
MIGRATION_LOCK_KEY = 0x666C6774


class PostgresSupport(DialectSupport):
    """Retry of 40001/40P01; migrations under a transaction-scoped advisory lock."""

    name = "postgres"

    def retryable(self, error: DBAPIError) -> bool:
        """Serialization failure and deadlock."""
        return error_code(error) in RETRYABLE

    def lock_for_migration(self, connection: Connection) -> None:
        """Released automatically when the migration's transaction ends."""
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})


@hookimpl
def fleetgate_ledger_schemes() -> list[str]:
    """This plugin serves postgresql+asyncpg URLs."""
    return SCHEMES


@hookimpl
def fleetgate_make_ledger(
    url: str, options: dict[str, Any], clock: Clock | None, demand: DemandPolicy
) -> CapacityLedger | None:
    """Build the SQL ledger for a postgresql+asyncpg URL."""
    if not url.startswith(SCHEMES[0] + "://"):
        return None
    from fleetgate.adapters.sql.ledger import SqlLedger

    return SqlLedger(url, options, dialect=PostgresSupport(), clock=clock, demand=demand)
