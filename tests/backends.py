"""Creating and dropping the per-session test database on a MariaDB or PostgreSQL server.

Synchronous on purpose: it runs once per session, before any event loop exists, through the same
async drivers fleetgate uses (no extra client library).
"""

from __future__ import annotations

import asyncio

from sqlalchemy import make_url, text
from sqlalchemy.ext.asyncio import create_async_engine


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
    """Drop database ``name`` (and, on PostgreSQL, any sessions still attached to it)."""
    url = make_url(server_url)
    if url.get_backend_name() == "postgresql":
        asyncio.run(_admin(server_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    else:
        asyncio.run(_admin(server_url, f"DROP DATABASE IF EXISTS {name}"))
