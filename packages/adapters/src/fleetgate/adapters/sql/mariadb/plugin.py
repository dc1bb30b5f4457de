"""The MariaDB ledger plugin: serves ``mysql+aiomysql://`` database URLs.

Two things matter for the guarded UPDATE. ``rowcount`` must count *matched* rows, not changed
ones, or a zero-sized admission would read as a refusal: the connection sets
``CLIENT.FOUND_ROWS``. And the session variables named in the options (for example
``innodb_snapshot_isolation=ON``, the default from MariaDB 11.6.2) are applied to every new
connection, so a pooled connection never runs in a different regime from the first. A reconcile
pass stages its node rows in a temporary table and writes them with one joined UPDATE.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import aiomysql
import pymysql
import sqlalchemy as sa
from pymysql.constants import CLIENT
from sqlalchemy import event, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from fleetgate.adapters.sql import answers, node_writes
from fleetgate.adapters.sql.answers import CONNECTION
from fleetgate.adapters.sql.dialect import Timeouts, error_code
from fleetgate.adapters.sql.ledger_plugin import LedgerPlugin
from fleetgate.adapters.sql.schema import NODE_NAME, TABLE_ARGS
from fleetgate.domain.capacity.reconcile import NodeResult

#: Deadlock (1213), lock wait timeout (1205), snapshot conflict ER_CHECKREAD (1020).
RETRYABLE = frozenset({1213, 1205, 1020})
MIGRATION_LOCK = "fleetgate_migrate"
#: Errors that mean the server cannot serve us now: too many connections (1040), access denied
#: (1044, 1045), unknown database (1049), shutdown in progress (1053), connection killed
#: (1927), statement time limit (1969), idle connection closed by the server (4031), and the
#: client's own: cannot connect (2002, 2003), server gone (2006), lost (2013), out of sync
#: after a loss (2014), ... (2055: lost while reading).
UNAVAILABLE = frozenset({1040, 1044, 1045, 1049, 1053, 1927, 1969, 4031, 2002, 2003, 2006, 2013})
UNAVAILABLE |= {2014, 2055, 1146}
#: A Galera node outside the primary component, or not yet synced: "WSREP has not yet prepared
#: node for application use" (1047). Another node, or this one later, can serve.
UNAVAILABLE |= {1047}
#: On a Galera node, reads wait until the node has applied every write the cluster committed
#: before they began (bit 1: SELECT, SHOW, BEGIN), so a caller reading through another node
#: sees its own write. Set unless the operator chose a value in ``session_variables``.
CAUSAL_READS = {"wsrep_sync_wait": "1"}

#: A reconcile pass's node rows; per connection, so concurrent passes never share it.
_staged = sa.Table(
    "reconcile_node_rows",
    sa.MetaData(),
    sa.Column("name", sa.String(NODE_NAME), primary_key=True),
    *(sa.Column(c, sa.BigInteger(), nullable=False) for c in node_writes.COLUMNS),
    sa.Column("expected_demand", sa.Double(), nullable=False),
    prefixes=["TEMPORARY"],
    **TABLE_ARGS,
)

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_VALUE = re.compile(r"^[A-Za-z0-9_.+-]{1,64}$")
_NUMBER = re.compile(r"^-?[0-9]+(\.[0-9]+)?$")


def session_statements(variables: dict[str, Any]) -> list[str]:
    """``SET SESSION name = value`` for each variable; names and values are checked, not quoted."""
    statements = []
    for name, value in sorted(variables.items()):
        if not _NAME.match(str(name)):
            raise ValueError(f"session_variables: {name!r} is not a variable name")
        rendered = str(value)
        if isinstance(value, bool):
            rendered = "ON" if value else "OFF"
        if not _VALUE.match(rendered):
            raise ValueError(f"session_variables.{name}: {value!r} is not a plain value")
        literal = rendered if _NUMBER.match(rendered) else f"'{rendered}'"
        statements.append(f"SET SESSION {name} = {literal}")
    return statements


class MariaDbSupport(LedgerPlugin):
    """FOUND_ROWS, per-connection session variables, retry of 1213/1205/1020."""

    name = "mariadb"
    schemes = ("mysql+aiomysql",)

    def engine_kwargs(self, options: dict[str, Any]) -> dict[str, Any]:
        """Matched-row counts, and a pool that recycles before the server's idle timeout."""
        return {
            "pool_recycle": 3600,
            "connect_args": {"client_flag": CLIENT.FOUND_ROWS},
        }

    def bound_waits(self, url: str, kwargs: dict[str, Any], timeouts: Timeouts) -> None:
        """The whole connect bounded, handshake included.

        aiomysql's ``connect_timeout`` bounds the TCP connect alone: a host that accepts and
        never greets would hold the request for good. SQLAlchemy's adapter takes the coroutine
        that connects (``async_creator_fn``); this one gives up after the connect timeout.
        """
        super().bound_waits(url, kwargs, timeouts)

        async def bounded(*args: Any, **kw: Any) -> Any:
            hosts = kw.pop("host", None)
            if not isinstance(hosts, tuple | list):
                return await asyncio.wait_for(
                    aiomysql.connect(*args, host=hosts, **kw), timeouts.connect
                )
            return await connect_first(list(hosts), timeouts.connect, *args, **kw)

        connect_args = kwargs.setdefault("connect_args", {})
        connect_args["connect_timeout"] = timeouts.connect
        connect_args["async_creator_fn"] = bounded

    def install(self, engine: AsyncEngine, options: dict[str, Any]) -> None:
        """Apply the configured session variables on every new connection.

        Also ``max_statement_time``, the statement bound (aiomysql has none on the client): the
        server aborts a statement running longer (1969), which is ``LedgerUnavailable``.
        """
        super().install(engine, options)
        variables = {"max_statement_time": Timeouts.from_options(options).statement}
        variables.update(options.get("session_variables") or {})
        statements = session_statements(variables)
        causal = session_statements({k: v for k, v in CAUSAL_READS.items() if k not in variables})

        @event.listens_for(engine.sync_engine, "connect")
        def _on_connect(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            try:
                for statement in statements:
                    cursor.execute(statement)
                # Each new connection asks: a URL listing several hosts may reach a Galera
                # node after a plain server, and the retry budget follows what was found last.
                self.multi_primary = wsrep_on(cursor)
                if self.multi_primary:
                    for statement in causal:
                        cursor.execute(statement)
            finally:
                cursor.close()

    def retryable(self, error: DBAPIError) -> bool:
        """Deadlock, lock wait timeout and snapshot-isolation conflict."""
        return error_code(error) in RETRYABLE

    def unavailable(self, error: DBAPIError) -> bool:
        """Refused or lost connections, a dropped database, a killed or timed-out statement."""
        return error_code(error) in UNAVAILABLE

    def lock_for_migration(self, connection: Connection) -> None:
        """A named server lock: DDL commits implicitly, so a transaction cannot hold it."""
        connection.execute(text("SELECT GET_LOCK(:name, 120)"), {"name": MIGRATION_LOCK})

    def unlock_after_migration(self, connection: Connection) -> None:
        """Release the named lock."""
        connection.execute(text("SELECT RELEASE_LOCK(:name)"), {"name": MIGRATION_LOCK})

    def node_local_locks(self, connection: Connection) -> bool:
        """On a Galera node GET_LOCK, FOR SHARE and SKIP LOCKED bind that node alone."""
        row = connection.execute(text("SHOW VARIABLES LIKE 'wsrep_on'")).first()
        return row is not None and str(row[1]).upper() == "ON"

    async def write_node_counters(
        self, conn: AsyncConnection, rows: list[NodeResult], now: float
    ) -> None:
        """Stage the rows in a temporary table (one multi-row INSERT), then one joined UPDATE.

        aiomysql sends a batched UPDATE as one round trip per row: 10,000 at 10,000 nodes.
        CREATE and DROP TEMPORARY TABLE do not end the transaction.
        """
        # A pass that failed on this pooled connection may have left its table behind.
        await conn.execute(sa.text(f"DROP TEMPORARY TABLE IF EXISTS {_staged.name}"))
        await conn.execute(sa.schema.CreateTable(_staged))
        await conn.execute(sa.insert(_staged), node_writes.values_of(rows))
        await conn.execute(node_writes.update_from(_staged, now))
        await conn.execute(sa.text(f"DROP TEMPORARY TABLE {_staged.name}"))


def wsrep_on(cursor: Any) -> bool:
    """True when the server behind a DB-API cursor is a Galera node with replication on."""
    cursor.execute("SHOW VARIABLES LIKE 'wsrep_on'")
    row = cursor.fetchone()
    return row is not None and str(row[1]).upper() == "ON"


async def _galera_ready(conn: Any) -> bool:
    """False for a Galera node that is not ready for clients; True for any other server."""
    async with conn.cursor() as cursor:
        await cursor.execute("SHOW VARIABLES LIKE 'wsrep_on'")
        row = await cursor.fetchone()
        if row is None or str(row[1]).upper() != "ON":
            return True
        await cursor.execute("SHOW STATUS LIKE 'wsrep_ready'")
        row = await cursor.fetchone()
        return row is not None and str(row[1]).upper() == "ON"


async def connect_first(hosts: list[str], connect_seconds: float, *args: Any, **kw: Any) -> Any:
    """Connect to the first of ``hosts`` (``host[:port]``, in the URL's order) that serves.

    aiomysql takes one host; a URL naming several (``?host=a:3306&host=b:3306``) is for a
    cluster whose nodes all take writes, so the first one that accepts the connection and is
    ready for clients (a Galera node: synced, in the primary component) is used. Each try is
    bounded by the connect timeout; the last failure is raised when none serves.
    """
    failure: BaseException | None = None
    default_port = int(kw.pop("port", None) or 3306)
    for entry in hosts:
        host, _, port = entry.rpartition(":") if ":" in entry else (entry, "", "")
        answers.asked(CONNECTION)  # each host gets the whole answer bound (answers.py)
        try:
            conn = await asyncio.wait_for(
                aiomysql.connect(*args, host=host, port=int(port or default_port), **kw),
                connect_seconds,
            )
        except (OSError, TimeoutError, pymysql.err.Error) as exc:
            failure = exc
            continue
        try:
            ready = await _galera_ready(conn)
        except (OSError, pymysql.err.Error) as exc:
            conn.close()
            failure = exc
            continue
        if not ready:
            conn.close()
            failure = pymysql.err.OperationalError(1047, f"{entry}: WSREP not ready")
            continue
        return conn
    if failure is None:  # pragma: no cover - the URL's hosts are never empty here
        raise pymysql.err.OperationalError(2003, "no database host given")
    raise failure


#: The plugin (entry point ``mariadb``).
plugin = MariaDbSupport()
