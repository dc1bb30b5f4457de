"""The databases a benchmark runs on, each in a fresh database of its own that is dropped after.

SQLite is a file in a temporary directory. MariaDB and PostgreSQL are the servers named by
``FLEETGATE_MARIADB_URL`` and ``FLEETGATE_POSTGRES_URL`` (what ``nox -s bench`` sets); each run
creates ``fgbench_<pid>_<hex>`` there. MariaDB runs twice: in the server's default regime and with
``innodb_snapshot_isolation=ON`` on every connection (the default from MariaDB 11.6.2).
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import tempfile
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import make_url, text
from sqlalchemy.ext.asyncio import create_async_engine

DEFAULT_MARIADB = "mysql+aiomysql://root@127.0.0.1:3306/test"
DEFAULT_POSTGRES = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"


@dataclass(frozen=True)
class Target:
    """One backend configuration: a label for the tables, its kind, and where its server is."""

    key: str
    label: str
    kind: str  # "sqlite" | "mariadb" | "postgres"
    server_url: str = ""
    session_variables: dict[str, str] = field(default_factory=dict)

    def ledger_options(
        self,
        pool_size: int = 8,
        *,
        group_commit: Mapping[str, Any] | None = None,
        migrate: bool = True,
        **capacity: Any,
    ) -> dict[str, Any]:
        """Ledger options as the composition root passes them, with a pool sized for the load.

        ``group_commit`` None leaves the ledger's default (what a deployment gets); ``migrate``
        False opens a second ledger on a database another one already migrated.
        """
        options: dict[str, Any] = {
            "capacity": capacity,
            "claims": {"enforcement": "advisory"},
            "session_variables": dict(self.session_variables),
            "migrate": migrate,
        }
        if group_commit is not None:
            options["group_commit"] = dict(group_commit)
        if self.kind != "sqlite":
            # One connection per concurrent writer, as a deployment would size its pool.
            options["engine"] = {"pool_size": pool_size, "max_overflow": 8}
        return options


def all_targets() -> list[Target]:
    """Every backend configuration, servers from the environment (``nox -s bench`` sets them)."""
    mariadb = os.environ.get("FLEETGATE_MARIADB_URL", DEFAULT_MARIADB)
    postgres = os.environ.get("FLEETGATE_POSTGRES_URL", DEFAULT_POSTGRES)
    return [
        Target("sqlite", "SQLite", "sqlite"),
        Target("mariadb", "MariaDB (default)", "mariadb", mariadb),
        Target(
            "mariadb-snapshot",
            "MariaDB (snapshot)",
            "mariadb",
            mariadb,
            {"innodb_snapshot_isolation": "ON"},
        ),
        Target("postgres", "PostgreSQL", "postgres", postgres),
    ]


async def _admin(server_url: str, statement: str) -> None:
    engine = create_async_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            await conn.execute(text(statement))
    finally:
        await engine.dispose()


async def reachable(target: Target) -> str | None:
    """None when the target can be used, else why not (a server that does not answer)."""
    if target.kind == "sqlite":
        return None
    try:
        await _admin(target.server_url, "SELECT 1")
    except Exception as exc:  # any failure to connect means "not measured", with the reason
        return f"{type(exc).__name__}: {exc}".splitlines()[0][:160]
    return None


async def server_version(target: Target) -> str:
    """The database's version string."""
    if target.kind == "sqlite":
        return f"SQLite {sqlite3.sqlite_version}"
    engine = create_async_engine(target.server_url)
    try:
        async with engine.connect() as conn:
            if target.kind == "postgres":
                value = (await conn.execute(text("SHOW server_version"))).scalar_one()
                return f"PostgreSQL {str(value).split()[0]}"
            value = (await conn.execute(text("SELECT VERSION()"))).scalar_one()
            return f"MariaDB {str(value).split('-MariaDB')[0]}"
    finally:
        await engine.dispose()


@asynccontextmanager
async def fresh_database(target: Target) -> AsyncIterator[str]:
    """A URL to an empty database of its own for ``target``, dropped (or deleted) afterwards."""
    if target.kind == "sqlite":
        with tempfile.TemporaryDirectory(prefix="fgbench-") as tmp:
            yield f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"
        return
    name = f"fgbench_{os.getpid()}_{secrets.token_hex(3)}"
    await _admin(target.server_url, f"CREATE DATABASE {name}")
    try:
        yield make_url(target.server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        force = " WITH (FORCE)" if target.kind == "postgres" else ""
        await _admin(target.server_url, f"DROP DATABASE IF EXISTS {name}{force}")
