"""What the dialects read from a driver error, and how they keep pooled connections alive."""

from __future__ import annotations

import sqlite3

import pymysql.err
import pytest
import sqlalchemy as sa
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import create_async_engine

from fleetgate.adapters import plugins
from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.sql.dialect import error_code
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.adapters.sql.mariadb.plugin import MariaDbSupport
from tests.adapters.sql.churn import Tally, counting_retries
from tests.backends import kill_session, server_of
from tests.conftest import Backend
from tests.ledgers import START


def wrapped(orig: BaseException) -> OperationalError:
    return OperationalError("UPDATE ...", {}, orig)


def test_a_mariadb_deadlock_is_known_by_its_errno_even_with_a_sqlstate() -> None:
    # A real server's error packet carries a SQLSTATE too ("40001" for a deadlock); the errno
    # is what the MariaDB plugin retries on.
    deadlock = wrapped(pymysql.err.OperationalError(1213, "Deadlock found", sqlstate="40001"))
    assert error_code(deadlock) == 1213
    assert MariaDbSupport().retryable(deadlock)
    syntax = wrapped(pymysql.err.ProgrammingError(1064, "syntax", sqlstate="42000"))
    assert not MariaDbSupport().retryable(syntax)


def test_a_sqlite_error_is_known_by_its_extended_code() -> None:
    busy = sqlite3.OperationalError("database is locked")
    busy.sqlite_errorcode = sqlite3.SQLITE_BUSY  # type: ignore[attr-defined]
    assert error_code(wrapped(busy)) == sqlite3.SQLITE_BUSY


@pytest.mark.parametrize(("idle_seconds", "retried"), [(0.0, False), (3600.0, True)])
async def test_a_connection_dropped_while_idle_never_fails_a_request(
    backend: Backend, idle_seconds: float, retried: bool
) -> None:
    """The idle ping stands in for pool_pre_ping: a pooled connection the server dropped is
    replaced before use once it sat idle past the bound. Within the bound it is not pinged, so
    its loss surfaces at the first statement, and the transaction is run again on a fresh
    connection (the case the bound trades for fewer round trips): a retry, never an error."""
    if backend.kind == "sqlite":
        pytest.skip("SQLite is a local file: there is no server side to drop")
    options = {**backend.ledger_options(), "migrate": True, "ping_idle_seconds": idle_seconds}
    ledger = plugins.make_ledger(
        plugins.plugin_manager(), backend.url, options, VirtualClock(START)
    )
    assert isinstance(ledger, SqlLedger)
    killer = create_async_engine(backend.url)
    await ledger.start()
    try:
        async with ledger.store.engine.connect() as conn:
            identity = sa.text(server_of(backend.kind).identity)
            victim = int((await conn.execute(identity)).scalar_one())
        await kill_session(killer, backend.kind, victim)
        tally = Tally()
        with counting_retries(tally):
            assert isinstance(await ledger.nodes(), list)
        assert tally.retries == (1 if retried else 0), tally.describe()
    finally:
        await ledger.close()
        await killer.dispose()
