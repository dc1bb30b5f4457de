"""The PostgreSQL ledger plugin: serves ``postgresql+asyncpg://`` database URLs.

PostgreSQL at READ COMMITTED re-evaluates a blocked UPDATE's WHERE on the row's newest version,
which is exactly the guard's semantics; serialization failures (40001) and deadlocks (40P01)
are retried whole. The admission can run in one call of a stored function (``admit_function``,
installed by the migrations), and a reconcile pass writes its node rows in one statement.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy import text
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from fleetgate.adapters.sql import node_writes
from fleetgate.adapters.sql.batch_items import BatchItem, ItemResult
from fleetgate.adapters.sql.dialect import Timeouts, error_code
from fleetgate.adapters.sql.ledger_plugin import LedgerPlugin
from fleetgate.adapters.sql.postgres import admit_function, batch_function
from fleetgate.adapters.sql.postgres.batch_function import BATCH_LOCK_TIMEOUT_MS
from fleetgate.domain.capacity.claims import ClaimEnforcement
from fleetgate.domain.capacity.dimensions import ALLOCATION
from fleetgate.domain.capacity.model import Admission, AdmitRequest
from fleetgate.domain.capacity.reconcile import NodeResult
from fleetgate.domain.ports import Audit

#: serialization_failure, deadlock_detected.
RETRYABLE = frozenset({"40001", "40P01"})
#: Arbitrary but fixed key of the advisory lock that serialises migrations.
MIGRATION_LOCK_KEY = 0x666C6774
#: SQLSTATE classes and codes that mean the database cannot serve us now: connection
#: exceptions (08), insufficient resources (53: too many connections, disk full), operator
#: intervention (57: terminated, shutting down, cannot connect now, statement timeout), invalid
#: authorization (28), the database gone or closed to connections (3D000, 55000).
UNAVAILABLE_CLASSES = ("08", "53", "57", "28")
UNAVAILABLE = frozenset({"3D000", "55000", "42P01"})


class PostgresSupport(LedgerPlugin):
    """Retry of 40001/40P01; migrations under a transaction-scoped advisory lock."""

    name = "postgres"
    schemes = ("postgresql+asyncpg",)
    admission_function = admit_function.NAME
    autocommit_reads = True

    def retryable(self, error: DBAPIError) -> bool:
        """Serialization failure and deadlock."""
        return error_code(error) in RETRYABLE

    def bound_waits(self, url: str, kwargs: dict[str, Any], timeouts: Timeouts) -> None:
        """asyncpg's connect ``timeout`` and its client-side ``command_timeout`` per statement.

        On the client, so a statement waiting on a silent network is bounded too (asyncpg then
        cancels it on the server).
        """
        super().bound_waits(url, kwargs, timeouts)
        connect_args = kwargs.setdefault("connect_args", {})
        connect_args["timeout"] = timeouts.connect
        connect_args["command_timeout"] = timeouts.statement

    def unavailable(self, error: DBAPIError) -> bool:
        """Connection, resource, operator-intervention and authorization failures; no database."""
        code = error_code(error)
        if not isinstance(code, str):
            return False
        return code in UNAVAILABLE or code.startswith(UNAVAILABLE_CLASSES)

    async def bound_batch_waits(self, conn: AsyncConnection) -> None:
        """``lock_timeout`` for the batch's transaction, far below ``deadlock_timeout`` (1 s).

        Only for the savepoint executor: the batch function carries the same bound itself
        (its ``SET`` clause, ``batch_function.BATCH_LOCK_TIMEOUT_MS``), with no statement.

        PostgreSQL looks for a deadlock only after a wait of ``deadlock_timeout``: a batch in a
        cycle would stall every caller of the batch and the other transaction for a second
        (the reliability soak, releasing while admitting, met one cycle after another). With
        the bound, the waiting item fails with ``lock_not_available`` instead: its own work is
        undone (its savepoint, or the batch function's exception block) and it is admitted
        alone, in the canonical order, after the batch; the items before it commit.
        """
        await conn.execute(text(f"SET LOCAL lock_timeout = '{BATCH_LOCK_TIMEOUT_MS}ms'"))

    async def admission_function_current(self, conn: AsyncConnection) -> bool:
        """``fleetgate_admit`` is installed with this code's digest."""
        return await admit_function.installed(conn)

    async def batch_function_current(self, conn: AsyncConnection) -> bool:
        """``fleetgate_admit_batch`` and ``fleetgate_admit`` are installed by this code."""
        return await batch_function.installed(conn)

    async def admit_by_function(
        self,
        conn: AsyncConnection,
        request: AdmitRequest,
        placement_id: str,
        now: float,
        enforcement: ClaimEnforcement,
        audit: Audit | None = None,
    ) -> Admission:
        """One call of ``fleetgate_admit``, finished in Python where it stops."""
        return await admit_function.admit_by_function(
            conn, request, placement_id, now, enforcement, audit
        )

    async def admit_batch_by_function(
        self,
        conn: AsyncConnection,
        items: Sequence[BatchItem],
        now: float,
        enforcement: ClaimEnforcement,
    ) -> list[ItemResult]:
        """One call of ``fleetgate_admit_batch``; it bounds its own lock waits (``SET`` clause)."""
        return await batch_function.postgres_batch_executor(conn, items, now, enforcement)

    def lock_for_migration(self, connection: Connection) -> None:
        """Released automatically when the migration's transaction ends."""
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})

    async def write_node_counters(
        self, conn: AsyncConnection, rows: list[NodeResult], now: float
    ) -> None:
        """One UPDATE joined to ``unnest`` of one array parameter per column.

        Five parameters whatever the row count: asyncpg sends each array as one typed value.
        """
        bigints = postgresql.ARRAY(sa.BigInteger())
        arrays = [
            sa.bindparam("names", [n.name for n in rows], type_=postgresql.ARRAY(sa.String())),
            *(
                sa.bindparam(c, [n.used.get(d) for n in rows], type_=bigints)
                for c, d in zip(node_writes.COLUMNS, ALLOCATION, strict=True)
            ),
            sa.bindparam(
                "demand", [n.expected_demand for n in rows], type_=postgresql.ARRAY(sa.Double())
            ),
        ]
        given = (
            sa.func.unnest(*arrays)
            .table_valued("name", *node_writes.COLUMNS, "expected_demand")
            .render_derived(name="given")
        )
        await conn.execute(node_writes.update_from(given, now))


#: The plugin (entry point ``postgres``).
plugin = PostgresSupport()
