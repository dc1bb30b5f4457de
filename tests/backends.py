"""The servers the tests run on, one description per server dialect, and what they do with them.

A server dialect's test backend is its entry in ``SERVERS``: how to reach a database that always
exists, drop one with sessions still attached, name and end a session, see its lock waits, and
the session variables a regime needs. The per-session database is created and dropped here too:
synchronously on purpose (it runs once per session, before any event loop exists), through the
same async drivers fleetgate uses (no extra client library). ``kind`` is the dialect plugin's
``DialectSupport.name``. A new dialect adds its entry here, and nothing else in the tests.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy import make_url, text
from sqlalchemy.ext.asyncio import create_async_engine


def _on(variable: str) -> bool:
    return os.environ.get(variable, "").lower() in {"1", "on", "true"}


def _mariadb_regime() -> dict[str, str]:
    """``FLEETGATE_TEST_MARIADB_SNAPSHOT=on``: the snapshot regime (MariaDB >= 11.6.2's default)."""
    return {"innodb_snapshot_isolation": "ON"} if _on("FLEETGATE_TEST_MARIADB_SNAPSHOT") else {}


@dataclass(frozen=True)
class Server:
    """What the tests need to know of one server dialect (SQL in its own language)."""

    kind: str
    #: The scheme of the URLs it serves, without the driver (``mysql`` of ``mysql+aiomysql``).
    scheme: str
    #: A database that always exists, to create and drop ours from.
    admin_database: str
    #: ``DROP DATABASE`` of ``{name}``, sessions still attached or not.
    drop: str
    #: This session's id.
    identity: str
    #: End session ``{id}`` (a signal: ``kill_session`` waits until it is gone).
    kill: str
    #: A row while session ``:id`` exists.
    alive: str
    #: The number of other sessions waiting for a lock.
    lock_waits: str
    #: The session variables of the regime the environment asks for.
    session_variables: Callable[[], dict[str, str]] = field(default=dict)

    def admin_url(self, url: str) -> str:
        """``url`` pointed at the admin database."""
        return make_url(url).set(database=self.admin_database).render_as_string(False)


SERVERS = (
    Server(
        kind="mariadb",
        scheme="mysql",
        admin_database="mysql",
        drop="DROP DATABASE IF EXISTS {name}",
        identity="SELECT CONNECTION_ID()",
        kill="KILL {id}",
        alive="SELECT id FROM information_schema.processlist WHERE id = :id",
        lock_waits="SELECT count(*) FROM information_schema.innodb_trx"
        " WHERE trx_state = 'LOCK WAIT'",
        session_variables=_mariadb_regime,
    ),
    Server(
        kind="postgres",
        scheme="postgresql",
        admin_database="postgres",
        drop="DROP DATABASE IF EXISTS {name} WITH (FORCE)",
        identity="SELECT pg_backend_pid()",
        kill="SELECT pg_terminate_backend({id})",
        alive="SELECT pid FROM pg_stat_activity WHERE pid = :id",
        lock_waits="SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        " AND pid <> pg_backend_pid()",
    ),
)


def server_for(url: str) -> Server:
    """The server that serves ``url`` (a server URL or one of its databases')."""
    scheme = make_url(url).get_backend_name()
    for server in SERVERS:
        if server.scheme == scheme:
            return server
    raise LookupError(f"FLEETGATE_TEST_DATABASE_URL: no test backend for {scheme!r} URLs")


def server_of(kind: str) -> Server:
    """The server of a ``Backend.kind``."""
    return next(s for s in SERVERS if s.kind == kind)


async def _admin(server_url: str, statement: str) -> None:
    engine = create_async_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            await conn.execute(text(statement))
    finally:
        await engine.dispose()


def create_database(server_url: str, name: str) -> str:
    """Create database ``name`` on the server and return a URL pointing at it."""
    asyncio.run(_admin(server_url, f"CREATE DATABASE {name}"))
    return make_url(server_url).set(database=name).render_as_string(hide_password=False)


def drop_database(server_url: str, name: str) -> None:
    """Drop database ``name`` (and any sessions still attached to it)."""
    asyncio.run(_admin(server_url, server_for(server_url).drop.format(name=name)))


async def kill_session(killer: Any, kind: str, victim: int) -> None:
    """End the server session ``victim`` and wait (bounded) until it is really gone.

    A kill is a signal: without the wait the victim's next statement could still run.
    """
    server = server_of(kind)
    async with killer.connect() as other:
        await other.execute(sa.text(server.kill.format(id=int(victim))))
        await other.commit()
        for _ in range(100):
            alive = await other.execute(sa.text(server.alive), {"id": int(victim)})
            await other.commit()
            if alive.first() is None:
                return
            await asyncio.sleep(0.05)
