"""A database that falls silent (connections open, nothing answers) is ``LedgerUnavailable`` within
``answer_seconds`` on every path of a transaction — a pooled connection's liveness ping, a new
connection, a statement, the COMMIT — naming the wait, with one WARNING line when it is lost and
one INFO line when it answers again, and no restart (issue 42 item 3).

The servers run through the TCP proxy of ``test_engine`` (``silent``: it accepts and swallows
everything). The bound is the product's own timer; the test's ``MARGIN`` is a hang guard far
past anything a loaded machine needs, and which timer fired is read from the message. On SQLite,
which cannot fall silent (a local file; its lock waits are the busy timeout's), the log lines
follow a database that vanishes and comes back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from fleetgate.adapters import plugins
from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.sql.answers import AnswerWatch
from fleetgate.adapters.sql.engine import CommitUnknown
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.errors import LedgerUnavailable
from fleetgate.domain.capacity.model import AdmitRequest, NodeSpec
from tests.adapters.sql.test_engine import (
    TIMEOUTS,
    Proxy,
    servers_only,
    sqlite_only,
    through,
    unavailable_within,
    upstream,
)
from tests.conftest import Backend
from tests.ledgers import START

ANSWER = 1.0
NODE = NodeSpec("a", Capacity(8, 8192, 80))
REQUEST = AdmitRequest("team", "a", Resources(1, 1, 1))


@contextlib.asynccontextmanager
async def proxied(
    backend: Backend, answer: float | None = ANSWER, **options: Any
) -> AsyncIterator[tuple[SqlLedger, Proxy]]:
    """A started ledger on the database under test, through a proxy of its own."""
    proxy = upstream(backend.url)
    await proxy.start()
    settings = backend.ledger_options()
    # None: the defaults, as a deployment has them.
    timeouts = {} if answer is None else {**TIMEOUTS, "answer_seconds": answer}
    settings.update(timeouts=timeouts, migrate=False, **options)
    made = plugins.make_ledger(
        plugins.plugin_manager(), through(backend.url, proxy), settings, VirtualClock(START)
    )
    assert isinstance(made, SqlLedger)
    await made.start()
    try:
        yield made, proxy
    finally:
        proxy.silent = False
        await made.close()
        with contextlib.suppress(Exception):
            await proxy.stop()


async def test_the_watch_bounds_each_wait_afresh_and_its_own_cleanup() -> None:
    # A wait that is answered in time starts the count again: three 0.6 s waits under a 1 s
    # bound complete; one 1.5 s wait does not, and neither does the cleanup it then starts.
    async with AnswerWatch(1.0) as watch:
        for _ in range(3):
            await asyncio.sleep(0.6)
            watch.asked("a statement's result")
    assert not watch.expired
    with pytest.raises(TimeoutError, match="did not answer a statement's result within 1 s"):
        async with AnswerWatch(1.0) as watch:
            watch.asked("a statement's result")
            try:
                await asyncio.sleep(60)
            finally:
                await asyncio.sleep(60)  # the cleanup waits too: cancelled again, at once
    assert watch.expired
    async with AnswerWatch(None) as unbounded:  # SQLite: no client-side bound
        await asyncio.sleep(0.01)
    assert not unbounded.expired


async def test_a_silent_database_is_unavailable_within_the_bound_on_every_path(
    ledger: SqlLedger, backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    servers_only(backend)
    await ledger.add_node(NODE)
    caplog.set_level(logging.INFO, logger="fleetgate.ledger")
    # ping_idle_seconds 0: a pooled connection is pinged at every checkout (its idle case).
    async with (
        proxied(backend) as (silent, proxy),
        proxied(backend, ping_idle_seconds=0) as (pinged, pinged_proxy),
    ):
        assert [n.name for n in await silent.nodes()] == ["a"]
        assert [n.name for n in await pinged.nodes()] == ["a"]
        proxy.silent = pinged_proxy.silent = True
        # A statement on the pooled connection; then (it was discarded) a read and the
        # admission's write, each on a new connection that is accepted and never greeted.
        message = await unavailable_within(ANSWER, silent.nodes)
        assert (
            message
            == f"read nodes: the database did not answer a statement's result within {ANSWER:g} s"
        )
        for call in (silent.cluster, lambda: silent.admit(REQUEST)):
            message = await unavailable_within(ANSWER, call)
            assert f"the database did not answer a connection within {ANSWER:g} s" in message
        # A pooled connection's liveness ping, at checkout.
        message = await unavailable_within(ANSWER, pinged.nodes)
        assert f"did not answer a connection within {ANSWER:g} s" in message
        # A statement of the admission's write on a pooled connection.
        proxy.silent = False
        await silent.nodes()
        proxy.silent = True
        message = await unavailable_within(ANSWER, lambda: silent.admit(REQUEST))
        assert f"did not answer a statement's result within {ANSWER:g} s" in message
        # Back: served again, by the same ledger, with no restart.
        proxy.silent = pinged_proxy.silent = False
        assert [n.name for n in await silent.nodes()] == ["a"]
        assert (await silent.admit(REQUEST)).admitted
        assert [n.name for n in await pinged.nodes()] == ["a"]
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    lost = [m for level, m in lines if level == "WARNING" and "lost the database" in m]
    back = [m for level, m in lines if level == "INFO" and "answers again" in m]
    # One line per change and ledger, not one per failed request: the first ledger was lost
    # twice (four failed requests) and came back twice, the pinged one once each.
    assert len(lost) == 3 and len(back) == 3, lines
    assert "did not answer" in lost[0] and "127.0.0.1" in lost[0]


async def test_a_silent_commit_is_unavailable_and_says_it_may_have_committed(
    ledger: SqlLedger, backend: Backend
) -> None:
    servers_only(backend)
    await ledger.add_node(NODE)
    async with proxied(backend) as (silent, proxy):

        async def work(conn: Any) -> None:
            await conn.execute(sa.text("SELECT 1"))
            proxy.silent = True  # the COMMIT, sent as this block ends, is never answered

        started = asyncio.get_running_loop().time()
        with pytest.raises(CommitUnknown) as raised:
            await asyncio.wait_for(silent.store.write(work, what="probe"), ANSWER + 10)
        assert asyncio.get_running_loop().time() - started < ANSWER + 10
        assert str(raised.value) == (
            f"probe: the database did not answer the COMMIT within {ANSWER:g} s, "
            "so whether it committed is unknown"
        )
        proxy.silent = False
        assert [n.name for n in await silent.nodes()] == ["a"]


async def test_with_the_default_bound_a_silent_database_is_unavailable_within_5_s(
    ledger: SqlLedger, backend: Backend
) -> None:
    """The deployment's defaults: 4 s per wait (before: 12 s on PostgreSQL, for ever on
    MariaDB, where aiomysql has no read timeout)."""
    servers_only(backend)
    await ledger.add_node(NODE)
    async with proxied(backend, answer=None) as (silent, proxy):
        await silent.nodes()
        assert silent.store.answer_seconds == 4.0
        proxy.silent = True
        message = await unavailable_within(4.0, lambda: silent.admit(REQUEST))
        assert "did not answer a statement's result within 4 s" in message


async def test_a_lost_sqlite_database_is_logged_once_and_its_return_too(
    backend: Backend, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sqlite_only(backend)
    home = tmp_path / "data"
    url = f"sqlite+aiosqlite:///{home / 'ledger.db'}"
    options = {**backend.ledger_options(), "timeouts": TIMEOUTS, "migrate": True}
    ledger = plugins.make_ledger(plugins.plugin_manager(), url, options, VirtualClock(START))
    assert isinstance(ledger, SqlLedger)
    caplog.set_level(logging.INFO, logger="fleetgate.ledger")
    await ledger.start()
    assert ledger.store.answer_seconds is None  # a local file: its own waits are bounded
    try:
        await ledger.add_node(NODE)
        await ledger.store.engine.dispose()
        shutil.move(home, tmp_path / "elsewhere")
        for _ in range(3):
            with pytest.raises(LedgerUnavailable):
                await ledger.nodes()
        shutil.move(tmp_path / "elsewhere", home)
        assert [n.name for n in await ledger.nodes()] == ["a"]
    finally:
        await ledger.close()
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert [level for level, m in lines if "the database at" in m] == ["WARNING", "INFO"], lines
