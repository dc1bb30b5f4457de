"""Running the Alembic migrations on the ledger's own engine.

``fleetgate db upgrade`` and ``SqlLedger.start()`` both end here. Migrations run on a connection
the ledger already holds, under the dialect's migration lock, so several workers starting at
once cannot race each other's ``CREATE TABLE``.

On a Galera node that lock (``GET_LOCK``) binds its own node alone: two workers starting at once
on two nodes would both hold it. There the lock is also a lease row written in a committed
transaction (:func:`take_lease`): Galera certifies it, so of two workers inserting it through
two nodes at once exactly one commits; the other's insert fails (certification conflict or
duplicate key) and it waits until the row is gone. The lease expires, so a worker that died
holding it delays the next one by at most ``LEASE_SECONDS``.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from fleetgate.adapters.sql.engine import Store

MIGRATIONS = Path(__file__).parent / "migrations"
LEASE_TABLE = "fleetgate_migration_lease"
LEASE_NAME = "migrate"
#: Longer than any migration runs; a lease older than this was left by a worker that died.
LEASE_SECONDS = 600.0
#: How long a worker waits for another's migration before it gives up.
LEASE_WAIT_SECONDS = 900.0


class MigrationLeaseBusy(RuntimeError):
    """Another worker held the migration lease for longer than this one would wait."""


def take_lease(
    connection: Connection, holder: str, wait_seconds: float = LEASE_WAIT_SECONDS
) -> None:
    """Insert the lease row and commit; wait while another worker's row is there.

    Inserting (not reading) is the point: a read is checked against this node only, a committed
    write against every node.
    """
    connection.execute(
        text(
            f"CREATE TABLE IF NOT EXISTS {LEASE_TABLE} (name VARCHAR(32) PRIMARY KEY, "
            "holder VARCHAR(128) NOT NULL, expires DOUBLE NOT NULL)"
        )
    )
    connection.commit()
    deadline = time.monotonic() + wait_seconds
    delay = 0.05
    while True:
        now = time.time()
        try:
            connection.execute(
                text(f"DELETE FROM {LEASE_TABLE} WHERE name = :name AND expires < :now"),
                {"name": LEASE_NAME, "now": now},
            )
            connection.execute(
                text(f"INSERT INTO {LEASE_TABLE} (name, holder, expires) VALUES (:n, :h, :e)"),
                {"n": LEASE_NAME, "h": holder, "e": now + LEASE_SECONDS},
            )
            connection.commit()
            return
        except DBAPIError:
            # Duplicate key (the row is another's), or the certification conflict of two
            # inserts through two nodes at once: either way, another worker holds it.
            _rollback(connection)
        if time.monotonic() > deadline:
            raise MigrationLeaseBusy(
                f"migrations: another worker held the migration lease for {wait_seconds:g} s"
            )
        time.sleep(delay)
        delay = min(delay * 2, 1.0)


def _rollback(connection: Connection) -> None:
    """Roll back; a transaction Galera already aborted may report the abort again here."""
    try:
        connection.rollback()
    except DBAPIError:
        connection.rollback()


def drop_lease(connection: Connection, holder: str) -> None:
    """Delete this worker's lease row, committing with it what the migration left open.

    A brute-force abort (another node's write certified first) is retried: the row must go, or
    the next worker waits for its expiry.
    """
    for attempt in range(10):
        try:
            connection.execute(
                text(f"DELETE FROM {LEASE_TABLE} WHERE name = :name AND holder = :holder"),
                {"name": LEASE_NAME, "holder": holder},
            )
            connection.commit()
            return
        except DBAPIError:
            _rollback(connection)
            if attempt == 9:
                raise
            time.sleep(0.05 * (attempt + 1))


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

    holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    def run(connection: Connection) -> str:
        cluster_wide = store.dialect.node_local_locks(connection)
        if cluster_wide:
            take_lease(connection, holder)
        store.dialect.lock_for_migration(connection)
        try:
            cfg = alembic_config()
            cfg.attributes["connection"] = connection
            command.upgrade(cfg, revision)
            revision_now = current_revision(connection) or ""
            if cluster_wide:
                connection.commit()  # the migration's last writes, before the lease goes
            return revision_now
        except BaseException:
            connection.rollback()
            raise
        finally:
            store.dialect.unlock_after_migration(connection)
            if cluster_wide:
                drop_lease(connection, holder)

    async with store.engine.connect() as conn:
        current = await conn.run_sync(run)
        await conn.commit()
    return current
