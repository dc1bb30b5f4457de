"""The SQLite plugin: BEGIN IMMEDIATE for writers, plain BEGIN for readers, pragmas, busy."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import OperationalError

from fleetgate.adapters import plugins
from fleetgate.adapters.sql.sqlite.plugin import SqliteSupport
from fleetgate.domain.capacity.dimensions import Capacity
from fleetgate.domain.capacity.model import NodeSpec


async def test_writers_begin_immediate_and_readers_do_not(tmp_path: Path) -> None:
    ledger = plugins.make_ledger(
        plugins.plugin_manager(), f"sqlite+aiosqlite:///{tmp_path / 'x.db'}", {}
    )
    await ledger.start()
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.startswith("BEGIN"):
            seen.append(statement)

    sa.event.listen(ledger.store.engine.sync_engine, "before_cursor_execute", record)
    try:
        await ledger.add_node(NodeSpec("a", Capacity(1, 1, 1)))
        await ledger.nodes()
        async with ledger.store.engine.connect() as conn:
            pragmas = [
                (await conn.exec_driver_sql(f"PRAGMA {p}")).scalar()
                for p in ("foreign_keys", "journal_mode", "busy_timeout")
            ]
    finally:
        await ledger.close()
    assert seen[:2] == ["BEGIN IMMEDIATE", "BEGIN"]
    assert pragmas == [1, "wal", 5000]


def test_the_embedded_default_creates_its_directory(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'deep' / 'er' / 'x.db'}"
    ledger = plugins.make_ledger(plugins.plugin_manager(), url, {})
    assert ledger.store.engine is not None
    assert (tmp_path / "deep" / "er").is_dir()


def test_busy_and_locked_are_retryable_other_errors_are_not() -> None:
    support = SqliteSupport()

    def error(code: int, message: str) -> OperationalError:
        orig = sqlite3.OperationalError(message)
        orig.sqlite_errorcode = code  # type: ignore[attr-defined]
        return OperationalError("x", {}, orig)

    assert support.retryable(error(sqlite3.SQLITE_BUSY, "database is locked"))
    assert support.retryable(error(sqlite3.SQLITE_LOCKED, "database table is locked"))
    assert support.retryable(error(517, "database is locked"))  # SQLITE_BUSY_SNAPSHOT
    assert not support.retryable(error(sqlite3.SQLITE_CONSTRAINT, "CHECK constraint failed"))
