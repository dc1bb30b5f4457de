"""A database that goes away costs a request seconds and a ``LedgerUnavailable``, never a bug's
error or an unbounded wait, and the ledger serves again as soon as the database is back, with
no restart (issue 27 item 2).

The server cases run the ledger through a TCP proxy of the test's own, which can refuse
connections (the port closed, every open connection cut) or accept them and stay silent. The
dropped-database case uses a database of its own on the server. On SQLite the database's
directory vanishes and comes back, and another process holds the write lock.

The timeouts are short here; each answer's bound is the configured waits plus a margin wide
enough for a busy machine (it catches the unbounded waits of before, not slowness).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import make_url

from fleetgate.adapters import plugins
from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.sql.dialect import Timeouts
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.adapters.sql.retry import RetryBudget
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.errors import LedgerUnavailable
from fleetgate.domain.capacity.model import AdmitRequest, NodeSpec
from tests.backends import _admin, server_of
from tests.conftest import Backend
from tests.ledgers import START

TIMEOUTS = {
    "connect_seconds": 1.0,
    "pool_seconds": 1.0,
    "statement_seconds": 1.0,
    "answer_seconds": 1.0,
}
#: Generous: a loaded machine may be slow, but not this slow; before, answers took 8 to 40 s
#: or never came (and were 500s).
MARGIN = 10.0


class Proxy:
    """A TCP proxy to the database server that can refuse, or accept and stay silent."""

    def __init__(self, host: str, port: int) -> None:
        # A host that is a directory is a Unix socket's (pgserver's PostgreSQL 16 listens on one).
        self.target = (host, port)
        self.port = 0
        self.silent = False
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        """Listen (again) on the same port."""
        self._server = await asyncio.start_server(
            self._serve, "127.0.0.1", self.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Close the port and cut every open connection: the server is gone."""
        assert self._server is not None
        self._server.close()
        for writer in list(self._open):
            writer.transport.abort()
        self._open.clear()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._open.add(writer)
        if self.silent:
            return  # accepted, never answered: a host that stopped responding
        host, port = self.target
        try:
            if host.startswith("/"):
                up_reader, up_writer = await asyncio.open_unix_connection(
                    f"{host}/.s.PGSQL.{port or 5432}"
                )
            else:
                up_reader, up_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.transport.abort()
            return
        self._open.add(up_writer)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(Exception):
                while data := await src.read(65536):
                    if self.silent:
                        continue  # swallowed: the other side waits for an answer forever
                    dst.write(data)
                    await dst.drain()
            dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


def upstream(url: str) -> Proxy:
    """A proxy to the server of ``url``, over TCP or its Unix socket (a ``host=`` query)."""
    parsed = make_url(url)
    socket_dir = parsed.query.get("host")
    if isinstance(socket_dir, str) and socket_dir.startswith("/"):
        return Proxy(socket_dir, parsed.port or 5432)
    return Proxy(parsed.host or "127.0.0.1", parsed.port or 0)


def through(url: str, proxy: Proxy) -> str:
    """``url`` with its server replaced by the proxy's port on 127.0.0.1."""
    parsed = make_url(url).difference_update_query(["host"])
    return parsed.set(host="127.0.0.1", port=proxy.port).render_as_string(False)


@contextlib.asynccontextmanager
async def ledger_on(url: str, backend: Backend, migrate: bool = False) -> AsyncIterator[SqlLedger]:
    options = backend.ledger_options()
    options.update(timeouts=TIMEOUTS, migrate=migrate)
    ledger = plugins.make_ledger(plugins.plugin_manager(), url, options, VirtualClock(START))
    assert isinstance(ledger, SqlLedger)
    await ledger.start()
    try:
        yield ledger
    finally:
        await ledger.close()


async def unavailable_within(bound: float, call: Callable[[], Awaitable[Any]]) -> str:
    """``call`` raises LedgerUnavailable, within ``bound`` seconds plus the margin."""
    started = time.monotonic()
    with pytest.raises(LedgerUnavailable) as raised:
        await asyncio.wait_for(call(), bound + MARGIN)
    assert time.monotonic() - started < bound + MARGIN
    return str(raised.value)


def servers_only(backend: Backend) -> None:
    if backend.kind == "sqlite":
        pytest.skip("a server's port and sessions; SQLite's file cases are below")


async def test_the_timeouts_are_checked() -> None:
    assert Timeouts.from_options({}) == Timeouts(3.0, 3.0, 10.0, 4.0)
    assert Timeouts.from_options({"timeouts": TIMEOUTS}) == Timeouts(1.0, 1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match=r"timeouts.pool_seconds: must be a number > 0"):
        Timeouts.from_options({"timeouts": {"pool_seconds": 0}})
    with pytest.raises(ValueError, match=r"timeouts: unknown option\(s\) connect"):
        Timeouts.from_options({"timeouts": {"connect": 1}})


async def test_a_refused_port_is_unavailable_at_once_and_recovers(
    ledger: SqlLedger, backend: Backend
) -> None:
    servers_only(backend)
    await ledger.add_node(NodeSpec("a", Capacity(8, 8192, 80)))  # migrated, with a node
    proxy = upstream(backend.url)
    await proxy.start()
    try:
        async with ledger_on(through(backend.url, proxy), backend) as proxied:
            assert [n.name for n in await proxied.nodes()] == ["a"]
            await proxy.stop()  # pooled connections cut, new ones refused
            request = AdmitRequest("team", "a", Resources(1, 1, 1))
            await unavailable_within(2.0, proxied.nodes)
            await unavailable_within(2.0, lambda: proxied.admit(request))
            await unavailable_within(2.0, proxied.cluster)
            await proxy.start()  # back: served again, no restart
            assert [n.name for n in await proxied.nodes()] == ["a"]
            assert (await proxied.admit(request)).admitted
    finally:
        with contextlib.suppress(Exception):
            await proxy.stop()


async def test_a_silent_server_is_unavailable_within_the_timeouts(
    ledger: SqlLedger, backend: Backend
) -> None:
    """Connections accepted but never answered: the connect timeout, then the client-side
    bound on a connection that falls silent mid-use (test_answers.py: every path)."""
    servers_only(backend)
    await ledger.add_node(NodeSpec("a", Capacity(8, 8192, 80)))
    proxy = upstream(backend.url)
    await proxy.start()
    try:
        async with ledger_on(through(backend.url, proxy), backend) as proxied:
            await proxied.nodes()
            proxy.silent = True  # the pooled connection's statements go unanswered
            await unavailable_within(1.0, proxied.nodes)
            proxy.silent = False
            await proxied.store.engine.dispose()
            proxy.silent = True  # a new connection is accepted and never answered
            await unavailable_within(1.0, proxied.nodes)
            proxy.silent = False
            assert [n.name for n in await proxied.nodes()] == ["a"]
    finally:
        await proxy.stop()


async def test_a_dropped_database_is_unavailable_and_recovers_when_back(
    backend: Backend,
) -> None:
    servers_only(backend)
    server = server_of(backend.kind)
    admin = server.admin_url(backend.url)
    name = f"fgt_gone_{os.getpid()}_{secrets.token_hex(3)}"
    own = make_url(backend.url).set(database=name).render_as_string(False)
    drop = server.drop.format(name=name)
    await _admin(admin, f"CREATE DATABASE {name}")
    try:
        async with ledger_on(own, backend, migrate=True) as ledger:
            await ledger.add_node(NodeSpec("a", Capacity(8, 8192, 80)))
            await _admin(admin, drop)
            request = AdmitRequest("team", "a", Resources(1, 1, 1))
            await unavailable_within(2.0, ledger.nodes)
            await unavailable_within(2.0, lambda: ledger.admit(request))
            await _admin(admin, f"CREATE DATABASE {name}")
            await ledger.migrate()  # back (empty, as an operator restores it): served again
            assert await ledger.nodes() == []
            await ledger.add_node(NodeSpec("a", Capacity(8, 8192, 80)))
            assert (await ledger.admit(request)).admitted
    finally:
        await _admin(admin, drop)


def sqlite_only(backend: Backend) -> None:
    if backend.kind != "sqlite":
        pytest.skip("SQLite's file; the servers' cases are above")


async def test_a_vanished_sqlite_directory_is_unavailable_and_recovers(
    backend: Backend, tmp_path: Path
) -> None:
    sqlite_only(backend)
    home = tmp_path / "data"
    url = f"sqlite+aiosqlite:///{home / 'ledger.db'}"
    async with ledger_on(url, backend, migrate=True) as ledger:
        await ledger.add_node(NodeSpec("a", Capacity(8, 8192, 80)))
        await ledger.store.engine.dispose()  # no connection left open on the old file
        shutil.move(home, tmp_path / "elsewhere")
        request = AdmitRequest("team", "a", Resources(1, 1, 1))
        await unavailable_within(2.0, ledger.nodes)
        await unavailable_within(2.0, lambda: ledger.admit(request))
        shutil.move(tmp_path / "elsewhere", home)  # back
        assert [n.name for n in await ledger.nodes()] == ["a"]
        assert (await ledger.admit(request)).admitted


async def test_a_sqlite_write_lock_held_elsewhere_is_unavailable_within_the_busy_timeouts(
    backend: Backend, tmp_path: Path
) -> None:
    sqlite_only(backend)
    path = tmp_path / "ledger.db"
    url = f"sqlite+aiosqlite:///{path}"
    async with ledger_on(url, backend, migrate=True) as ledger:
        await ledger.add_node(NodeSpec("a", Capacity(8, 8192, 80)))
        ledger.store.options["busy_timeout_ms"] = 200
        # Conflicts are retried for a time budget: a short one, so the answer comes soon.
        ledger.store.single_budget = RetryBudget(deadline=0.5)
        await ledger.store.dispose()  # a new engine: its connections wait 200 ms for the lock
        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("BEGIN EXCLUSIVE")
            request = AdmitRequest("team", "a", Resources(1, 1, 1))
            # The deadline, then the last busy wait.
            message = await unavailable_within(0.5 + 0.2, lambda: ledger.admit(request))
            assert "locked" in message
        finally:
            other.close()
        assert (await ledger.admit(request)).admitted


async def test_an_error_from_a_table_gone_is_unavailable(ledger: SqlLedger) -> None:
    """A database dropped under a running process (the MariaDB session stays connected)."""
    async with ledger.store.engine.begin() as conn:
        await conn.execute(sa.text("DROP TABLE IF EXISTS fg_probe_gone"))
    with pytest.raises(LedgerUnavailable):
        await ledger.store.read(
            lambda conn: conn.execute(sa.text("SELECT * FROM fg_probe_gone")), what="probe"
        )


async def test_no_free_pooled_connection_is_unavailable_within_the_pool_timeout(
    backend: Backend,
) -> None:
    """Every pooled connection busy past ``pool_seconds``: a 503, not SQLAlchemy's own error."""
    options = {
        "engine": {"pool_size": 1, "max_overflow": 0},
        # The pool's bound below the answer bound, as by default: its own message comes first.
        "timeouts": {**TIMEOUTS, "answer_seconds": 2.0},
    }
    async with ledger_on(backend.url, backend, migrate=True) as ledger:
        ledger.store.options.update(options)
        await ledger.store.dispose()  # a new engine with a pool of one
        async with ledger.store.engine.connect() as holder:
            await holder.execute(sa.text("SELECT 1"))
            message = await unavailable_within(1.0, ledger.nodes)
        assert "no free database connection" in message
        await ledger.nodes()  # the connection is back: served


async def _left_open(conn: Any) -> bool:
    """One statement, then whether the server says a transaction is still open (asyncpg reads
    the transaction status of the server's every ReadyForQuery)."""
    await conn.execute(sa.text("SELECT 1"))
    raw = await conn.get_raw_connection()
    return bool(raw.driver_connection.is_in_transaction())


async def test_a_one_statement_read_is_its_own_transaction_on_postgresql(
    ledger: SqlLedger, backend: Backend
) -> None:
    """``read_one`` spares PostgreSQL the BEGIN and COMMIT round trips ``read`` sends."""
    if backend.kind != "postgres":
        pytest.skip("asyncpg reports the server's transaction status")
    assert not await ledger.store.read_one(_left_open, what="probe")
    assert await ledger.store.read(_left_open, what="probe")
