"""Opening a ledger on a target, and filling it fast with bulk INSERTs (never through admission).

Benchmarks need 10,000 nodes and 200,000 placements in seconds, so rows are written with
multi-row INSERTs on the ledger's own engine, and every counter is then set to exactly what the
rows imply: the state a long run of admissions would have left.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from benchmarks.targets import Target
from fleetgate.adapters import plugins
from fleetgate.adapters.clock import SystemClock
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.adapters.sql.nodes import recompute_totals, spec_values
from fleetgate.adapters.sql.schema import CLUSTER_ID, cluster, nodes, placements
from fleetgate.domain.capacity.dimensions import ALLOCATION, Capacity, Resources
from fleetgate.domain.capacity.model import NodeSpec
from fleetgate.domain.ports import Clock

#: Every benchmark node: big enough that no admission cell ever fills one.
NODE_CAPACITY = Capacity(threads=64, memory_mb=1 << 22, disk_gb=1 << 20)
#: What a node publishes: 64 schedulable threads at load 2, so the demand clause is evaluated.
CPU_SCHEDULABLE = 64
CPU_LOAD = 2.0
#: One benchmark placement.
SIZE = Resources(cpus=1, memory_mb=1024, disk_gb=10)
BATCH = 2000


def node_names(count: int) -> list[str]:
    """``node-00000`` … in a fixed order."""
    width = max(5, len(str(count)))
    return [f"node-{i:0{width}d}" for i in range(count)]


@asynccontextmanager
async def open_ledger(
    target: Target,
    url: str,
    *,
    pool_size: int = 8,
    clock: Clock | None = None,
    group_commit: Mapping[str, Any] | None = None,
    migrate: bool = True,
) -> AsyncIterator[SqlLedger]:
    """A started ledger (schema migrated unless ``migrate`` is false) on ``url``.

    Built through the plugin manager; ``group_commit`` None keeps the ledger's default.
    """
    options = target.ledger_options(pool_size, group_commit=group_commit, migrate=migrate)
    ledger = plugins.make_ledger(plugins.plugin_manager(), url, options, clock or SystemClock())
    assert isinstance(ledger, SqlLedger)
    await ledger.start()
    try:
        yield ledger
    finally:
        await ledger.close()


async def _insert(ledger: SqlLedger, table: sa.Table, rows: Sequence[dict[str, Any]]) -> None:
    for start in range(0, len(rows), BATCH):
        async with ledger.store.engine.begin() as conn:
            await conn.execute(sa.insert(table), list(rows[start : start + BATCH]))


async def seed_nodes(ledger: SqlLedger, count: int) -> list[str]:
    """Insert ``count`` empty schedulable nodes with metrics; set the cluster totals."""
    now = ledger.store.now_epoch()
    names = node_names(count)
    rows = []
    for name in names:
        values = spec_values(NodeSpec(name, NODE_CAPACITY, pool="bench"), ledger.overcommit)
        rows.append(
            {
                "name": name,
                "schedulable": True,
                "cpu_load_1": CPU_LOAD,
                "cpu_schedulable": CPU_SCHEDULABLE,
                "metrics_at": now,
                "created_at": now,
                "updated_at": now,
                **values,
            }
        )
    await _insert(ledger, nodes, rows)
    async with ledger.store.engine.begin() as conn:
        await recompute_totals(conn, now)
    return names


async def seed_placements(
    ledger: SqlLedger, names: Sequence[str], count: int, *, seed: int = 1
) -> None:
    """Insert ``count`` placements spread at random over ``names`` and set every counter to match.

    Admission times are spread over the last 20 minutes, so the demand decay has work to do.
    """
    rng = random.Random(seed)
    now = ledger.store.now_epoch()
    per_node = {name: 0 for name in names}
    rows = []
    for i in range(count):
        node = names[rng.randrange(len(names))]
        per_node[node] += 1
        rows.append(
            {
                "id": str(uuid.UUID(int=rng.getrandbits(128))),
                "namespace": f"team-{i % 20}",
                "node": node,
                "cpus": SIZE.cpus,
                "memory_mb": SIZE.memory_mb,
                "disk_gb": SIZE.disk_gb,
                "demand": 0.6,
                "admitted_at": now - rng.uniform(0, 1200),
                "request_id": None,
                "claim_id": None,
            }
        )
    await _insert(ledger, placements, rows)
    updates = [
        {"n": name, **{f"u_{d}": k * SIZE.get(d) for d in ALLOCATION}, "demand": 0.6 * k}
        for name, k in per_node.items()
        if k
    ]
    statement = (
        sa.update(nodes)
        .where(nodes.c.name == sa.bindparam("n"))
        .values(
            expected_demand=sa.bindparam("demand"),
            **{f"used_{d}": sa.bindparam(f"u_{d}") for d in ALLOCATION},
        )
    )
    for start in range(0, len(updates), BATCH):
        async with ledger.store.engine.begin() as conn:
            await conn.execute(statement, updates[start : start + BATCH])
    totals = {f"unclaimed_used_{d}": count * SIZE.get(d) for d in ALLOCATION}
    async with ledger.store.engine.begin() as conn:
        await conn.execute(sa.update(cluster).where(cluster.c.id == CLUSTER_ID).values(**totals))


async def reset(ledger: SqlLedger) -> None:
    """Forget every placement and event; zero every used counter and demand (nodes stay)."""
    zeros = {f"used_{d}": 0 for d in ALLOCATION}
    async with ledger.store.engine.begin() as conn:
        await conn.execute(sa.delete(placements))
        await conn.execute(sa.text("DELETE FROM events"))
        await conn.execute(sa.update(nodes).values(expected_demand=0.0, **zeros))
        await conn.execute(
            sa.update(cluster)
            .where(cluster.c.id == CLUSTER_ID)
            .values(**{f"unclaimed_used_{d}": 0 for d in ALLOCATION})
        )


def epoch_now() -> float:
    """Wall-clock epoch seconds."""
    return datetime.now(UTC).timestamp()
