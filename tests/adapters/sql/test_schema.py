"""The schema as migrated: it matches the metadata, and its constraints hold on every backend."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy.exc import DBAPIError

from fleetgate.adapters import plugins
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.adapters.sql.migrate import alembic_config, head
from fleetgate.adapters.sql.schema import claims, cluster, metadata, nodes
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.model import NodeSpec
from tests.adapters.sql.seed import insert_claim


async def test_the_migration_builds_exactly_the_metadata(ledger: SqlLedger) -> None:
    def diff(conn: sa.Connection) -> list[Any]:
        context = MigrationContext.configure(conn, opts={"compare_type": False})
        return compare_metadata(context, metadata)

    async with ledger.store.engine.connect() as conn:
        differences = await conn.run_sync(diff)
    assert differences == []


async def test_migrating_again_is_a_no_op_at_head(ledger: SqlLedger) -> None:
    assert await ledger.migrate() == head() == "0006_reservations"


async def test_the_revision_downgrades_cleanly_and_upgrades_again(tmp_sqlite_url: str) -> None:
    ledger = plugins.make_ledger(plugins.plugin_manager(), tmp_sqlite_url, {})

    def downgrade(conn: sa.Connection) -> list[str]:
        cfg = alembic_config()
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "base")
        return sorted(sa.inspect(conn).get_table_names())

    try:
        assert await ledger.migrate("head") == "0006_reservations"
        async with ledger.store.engine.connect() as conn:
            assert await conn.run_sync(downgrade) == ["alembic_version"]
            await conn.commit()
        await ledger.start()  # migrates back up to head
        assert (await ledger.cluster()).total == Resources()
    finally:
        await ledger.close()


async def test_one_active_claim_per_namespace_is_a_database_constraint(ledger: SqlLedger) -> None:
    await insert_claim(ledger, "team", Resources(1, 1, 1), claim_id="c1")
    with pytest.raises(DBAPIError):
        await insert_claim(ledger, "team", Resources(1, 1, 1), claim_id="c2")
    await insert_claim(ledger, "team", Resources(1, 1, 1), claim_id="c3", active=False)
    await insert_claim(ledger, "team", Resources(1, 1, 1), claim_id="c4", active=False)
    await insert_claim(ledger, "other", Resources(1, 1, 1), claim_id="c5")


async def test_an_active_claim_must_name_its_own_namespace(ledger: SqlLedger) -> None:
    await insert_claim(ledger, "team", Resources(1, 1, 1), claim_id="c1", active=False)
    async with ledger.store.engine.connect() as conn:
        with pytest.raises(DBAPIError):
            await conn.execute(
                sa.update(claims).where(claims.c.id == "c1").values(active_namespace="team")
            )
        await conn.rollback()


@pytest.mark.parametrize(
    ("table", "values"),
    [
        (nodes, {"used_cpus": -1}),
        (nodes, {"expected_demand": -0.5}),
        (cluster, {"unclaimed_used_memory_mb": -1}),
    ],
)
async def test_counters_can_never_go_negative(
    ledger: SqlLedger, table: sa.Table, values: dict[str, Any]
) -> None:
    await ledger.add_node(NodeSpec("a", Capacity(1, 1, 1)))
    async with ledger.store.engine.connect() as conn:
        with pytest.raises(DBAPIError):
            await conn.execute(sa.update(table).values(**values))
        await conn.rollback()


async def test_the_cluster_row_is_a_singleton(ledger: SqlLedger) -> None:
    async with ledger.store.engine.connect() as conn:
        with pytest.raises(DBAPIError):
            await conn.execute(sa.insert(cluster).values(id=2, updated_at=0.0))
        await conn.rollback()


async def test_names_compare_exactly(ledger: SqlLedger) -> None:
    # utf8mb4_bin on MariaDB: "Node-A" and "node-a" are two nodes, as on SQLite and PostgreSQL.
    await ledger.add_node(NodeSpec("node-a", Capacity(1, 1, 1)))
    await ledger.add_node(NodeSpec("Node-A", Capacity(1, 1, 1)))
    assert [n.name for n in await ledger.nodes()] == ["Node-A", "node-a"]
