"""The ceiling: a captured admission sent through the bare driver, with no fleetgate code at all.

One raw connection per writer (aiosqlite, aiomysql or asyncpg, the drivers the ledger uses),
configured as the dialect plugin configures the ledger's (SQLite: WAL, busy timeout, BEGIN
IMMEDIATE; MariaDB: matched-row counts and the session variables), running the captured
statements in one transaction and fetching what a SELECT returns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiomysql
import aiosqlite
import asyncpg
from pymysql.constants import CLIENT
from sqlalchemy import make_url

from benchmarks.capture import Script


class RawConnection:
    """One bare driver connection that can run a captured script as a transaction."""

    async def run(self, script: Script, values: Mapping[str, Any]) -> None:
        """Send every statement of ``script`` with ``values`` in its slots, then commit."""
        raise NotImplementedError

    async def close(self) -> None:
        """Close the connection."""
        raise NotImplementedError


class RawSqlite(RawConnection):
    """aiosqlite in autocommit mode: the script's own ``BEGIN IMMEDIATE`` opens the transaction."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self.conn = conn

    @classmethod
    async def open(cls, path: str) -> RawSqlite:
        """Connect with the pragmas the SQLite plugin sets."""
        conn = await aiosqlite.connect(path, isolation_level=None)
        for pragma in (
            "PRAGMA busy_timeout = 5000",
            "PRAGMA foreign_keys = ON",
            "PRAGMA journal_mode = WAL",
            "PRAGMA synchronous = NORMAL",
        ):
            await conn.execute(pragma)
        return cls(conn)

    async def run(self, script: Script, values: Mapping[str, Any]) -> None:
        """Run the script; COMMIT, or ROLLBACK on any error."""
        try:
            for s in script.statements:
                async with self.conn.execute(s.sql, s.bind(values)) as cursor:
                    if s.returns_rows:
                        await cursor.fetchall()
            if self.conn.in_transaction:  # the script ends with the ledger's own COMMIT
                await self.conn.execute("COMMIT")
        except BaseException:
            if self.conn.in_transaction:
                await self.conn.execute("ROLLBACK")
            raise

    async def close(self) -> None:
        """Close the connection."""
        await self.conn.close()


class RawMysql(RawConnection):
    """aiomysql with autocommit off (the transaction begins with the first statement)."""

    def __init__(self, conn: aiomysql.Connection) -> None:
        self.conn = conn

    @classmethod
    async def open(cls, url: str, session_variables: Mapping[str, str]) -> RawMysql:
        """Connect with FOUND_ROWS and the target's session variables."""
        u = make_url(url)
        conn = await aiomysql.connect(
            host=u.host or "127.0.0.1",
            port=u.port or 3306,
            user=u.username or "root",
            password=u.password or "",
            db=u.database,
            client_flag=CLIENT.FOUND_ROWS,
            autocommit=False,
        )
        async with conn.cursor() as cursor:
            for name, value in session_variables.items():
                await cursor.execute(f"SET SESSION {name} = '{value}'")
        return cls(conn)

    async def run(self, script: Script, values: Mapping[str, Any]) -> None:
        """Run the script and commit, or roll back on any error."""
        try:
            async with self.conn.cursor() as cursor:
                for s in script.statements:
                    await cursor.execute(s.sql, s.bind(values))
                    if s.returns_rows:
                        await cursor.fetchall()
            await self.conn.commit()
        except BaseException:
            await self.conn.rollback()
            raise

    async def close(self) -> None:
        """Close the connection."""
        self.conn.close()


class RawPostgres(RawConnection):
    """asyncpg, each statement prepared once and cached by the driver, in one transaction."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn

    @classmethod
    async def open(cls, url: str) -> RawPostgres:
        """Connect."""
        u = make_url(url)
        conn = await asyncpg.connect(
            host=u.host or "127.0.0.1",
            port=u.port or 5432,
            user=u.username or "postgres",
            password=u.password,
            database=u.database,
        )
        return cls(conn)

    async def run(self, script: Script, values: Mapping[str, Any]) -> None:
        """Run the script in a transaction."""
        async with self.conn.transaction():
            for s in script.statements:
                if s.returns_rows:
                    await self.conn.fetch(s.sql, *s.bind(values))
                else:
                    await self.conn.execute(s.sql, *s.bind(values))

    async def close(self) -> None:
        """Close the connection."""
        await self.conn.close()


async def connect(kind: str, url: str, session_variables: Mapping[str, str]) -> RawConnection:
    """A raw connection for a database URL of the given kind."""
    if kind == "sqlite":
        return await RawSqlite.open(str(make_url(url).database))
    if kind == "mariadb":
        return await RawMysql.open(url, session_variables)
    return await RawPostgres.open(url)
