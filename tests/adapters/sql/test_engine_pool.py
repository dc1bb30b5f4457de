"""The engine's connection pool: sized from the settings, and a steady load opens no sessions."""

from __future__ import annotations

import asyncio

import sqlalchemy as sa
from sqlalchemy.pool import QueuePool

from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.sql.dialect import DialectSupport
from fleetgate.adapters.sql.engine import DEFAULT_POOL_OVERFLOW, DEFAULT_POOL_SIZE, Store
from tests.ledgers import START


async def test_a_file_database_pool_is_sized_from_the_options(tmp_sqlite_url: str) -> None:
    store = Store(tmp_sqlite_url, {"pool": {"size": 3, "overflow": 1}}, DialectSupport())
    try:
        pool = store.engine.pool
        assert isinstance(pool, QueuePool)
        assert (pool.size(), pool._max_overflow) == (3, 1)
    finally:
        await store.dispose()


async def test_without_options_the_pool_keeps_the_default_connections(tmp_sqlite_url: str) -> None:
    store = Store(tmp_sqlite_url, {}, DialectSupport(), VirtualClock(START))
    try:
        pool = store.engine.pool
        assert isinstance(pool, QueuePool)
        assert (pool.size(), pool._max_overflow) == (DEFAULT_POOL_SIZE, DEFAULT_POOL_OVERFLOW)
    finally:
        await store.dispose()


async def test_concurrent_work_within_the_pool_size_reuses_its_connections(
    tmp_sqlite_url: str,
) -> None:
    # As many at once as the default pool keeps: SQLAlchemy's own 5 + 10 opened and closed
    # eleven sessions a round here.
    store = Store(tmp_sqlite_url, {}, DialectSupport())
    opened: list[object] = []
    sa.event.listen(store.engine.sync_engine, "connect", lambda conn, _: opened.append(conn))

    async def read() -> None:
        async with store.engine.connect() as conn:
            await conn.execute(sa.text("SELECT 1"))
            await asyncio.sleep(0)

    try:
        for _ in range(5):
            await asyncio.gather(*(read() for _ in range(DEFAULT_POOL_SIZE)))
        pool = store.engine.pool
        assert isinstance(pool, QueuePool)
        assert len(opened) <= DEFAULT_POOL_SIZE and pool.checkedin() == len(opened)
    finally:
        await store.dispose()
