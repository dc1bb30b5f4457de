"""Alembic environment, async-capable.

The ledger runs migrations on a connection it already holds (``config.attributes["connection"]``,
a sync facade from ``AsyncConnection.run_sync``). Run from the ``alembic`` command line instead,
it builds its own async engine from ``sqlalchemy.url``. A database that cannot ALTER most
constraints in place (SQLite: SQLAlchemy's ``supports_alter`` is false) gets batch mode ("move
and copy").
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from fleetgate.adapters.sql.schema import metadata

config = context.config


def run_on(connection: Connection) -> None:
    """Run the pending migrations on ``connection``."""
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=not connection.dialect.supports_alter,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_online(url: str) -> None:
    engine = create_async_engine(url, poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            await conn.run_sync(run_on)
            await conn.commit()
    finally:
        await engine.dispose()


if context.is_offline_mode():
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=metadata,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()
elif (given := config.attributes.get("connection")) is not None:
    run_on(given)
else:
    asyncio.run(_run_online(config.get_main_option("sqlalchemy.url") or ""))
