"""Running the Alembic migrations on the ledger's own engine.

``fleetgate db upgrade`` and ``SqlLedger.start()`` both end here. Migrations run on a connection
the ledger already holds, under the dialect's migration lock, so several workers starting at
once cannot race each other's ``CREATE TABLE``.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection

from fleetgate.adapters.sql.engine import Store

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(url: str = "") -> Config:
    """An Alembic config pointing at fleetgate's migrations (no alembic.ini needed)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    if url:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def head() -> str:
    """The newest revision shipped with this version of fleetgate."""
    revision = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if revision is None:  # pragma: no cover - the package ships its migrations
        raise RuntimeError("no migrations found")
    return revision


def current_revision(connection: Connection) -> str | None:
    """The revision the database is at (None before the first migration)."""
    return MigrationContext.configure(connection).get_current_revision()


async def current(store: Store) -> str | None:
    """The revision the store's database is at, read without changing anything."""
    async with store.engine.connect() as conn:
        return await conn.run_sync(current_revision)


def history() -> list[tuple[str, str]]:
    """Every shipped revision, oldest first, with its one-line description."""
    script = ScriptDirectory.from_config(alembic_config())
    return [(r.revision, r.doc or "") for r in reversed(list(script.walk_revisions()))]


async def upgrade(store: Store, revision: str = "head") -> str:
    """Migrate the store's database to ``revision`` and return the revision now current."""

    def run(connection: Connection) -> str:
        store.dialect.lock_for_migration(connection)
        try:
            cfg = alembic_config()
            cfg.attributes["connection"] = connection
            command.upgrade(cfg, revision)
            return current_revision(connection) or ""
        finally:
            store.dialect.unlock_after_migration(connection)

    async with store.engine.connect() as conn:
        current = await conn.run_sync(run)
        await conn.commit()
    return current
