"""Node lifecycle in the ledger: add, update, remove, metrics, cordon — keeping cluster totals.

Every node write locks the cluster row first (the canonical order: cluster, then nodes), then
changes the node, then recomputes ``total_* = Σ limit_*`` from the nodes table in the same
transaction. Totals are therefore right the moment a node changes, long before any reconcile.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from fleetgate.adapters.sql.engine import Store
from fleetgate.adapters.sql.events import Audited
from fleetgate.adapters.sql.guarded import lock, read_locked, update
from fleetgate.adapters.sql.rows import node_state
from fleetgate.adapters.sql.schema import CLUSTER_ID, cluster, nodes, placements
from fleetgate.domain.capacity.dimensions import ALLOCATION, Overcommit, node_limits
from fleetgate.domain.capacity.errors import LedgerError, NodeBusy, NodeExists, NodeNotFound
from fleetgate.domain.capacity.model import NodeMetrics, NodeSpec, NodeState, check_node_name


def spec_values(spec: NodeSpec, overcommit: Overcommit) -> dict[str, Any]:
    """The columns a NodeSpec sets: pool, labels, capacity and the limits derived from it."""
    limits = node_limits(spec.capacity, overcommit)
    return {
        "pool": spec.pool,
        "labels": dict(spec.labels),
        "threads": spec.capacity.threads,
        "memory_mb": spec.capacity.memory_mb,
        "disk_gb": spec.capacity.disk_gb,
        **{f"limit_{d}": limits.get(d) for d in ALLOCATION},
    }


async def lock_cluster(conn: AsyncConnection) -> None:
    """Take the cluster row's lock (first statement of every node write)."""
    if await lock(conn, cluster, cluster.c.id == CLUSTER_ID) == 0:
        raise LedgerError("the cluster row is missing: run `fleetgate db upgrade`")


async def recompute_totals(conn: AsyncConnection, now: float) -> None:
    """``total_d = Σ limit_d`` over every node, in the caller's transaction."""
    values: dict[str, Any] = {
        f"total_{d}": sa.select(
            sa.func.coalesce(sa.func.sum(nodes.c[f"limit_{d}"]), 0)
        ).scalar_subquery()
        for d in ALLOCATION
    }
    values["updated_at"] = now
    await update(conn, cluster, cluster.c.id == CLUSTER_ID, values)


async def _read_node(conn: AsyncConnection, name: str) -> NodeState:
    row = await read_locked(conn, nodes, nodes.c.name == name)
    if row is None:
        raise NodeNotFound(name)
    return node_state(row)


async def add(
    store: Store,
    spec: NodeSpec,
    overcommit: Overcommit,
    trail: Audited[NodeState] | None = None,
) -> NodeState:
    """Insert a node (schedulable, nothing used) and add its limits to the cluster totals."""

    async def work(conn: AsyncConnection) -> NodeState:
        now = store.now_epoch()
        await lock_cluster(conn)
        try:
            await conn.execute(
                sa.insert(nodes).values(
                    name=spec.name,
                    schedulable=True,
                    created_at=now,
                    updated_at=now,
                    **spec_values(spec, overcommit),
                )
            )
        except IntegrityError as exc:
            raise NodeExists(spec.name) from exc
        await recompute_totals(conn, now)
        return await _read_node(conn, spec.name)

    return await (trail or Audited(None)).write(store, work, what=f"add node {spec.name}")


async def replace(
    store: Store,
    spec: NodeSpec,
    overcommit: Overcommit,
    trail: Audited[NodeState] | None = None,
) -> NodeState:
    """Replace a node's pool, labels and capacity; limits are re-derived, counters untouched.

    A limit may end up below what is already used: nothing is evicted, the node just refuses
    until enough is released.
    """

    async def work(conn: AsyncConnection) -> NodeState:
        now = store.now_epoch()
        await lock_cluster(conn)
        values = {**spec_values(spec, overcommit), "updated_at": now}
        if await update(conn, nodes, nodes.c.name == spec.name, values) == 0:
            raise NodeNotFound(spec.name)
        await recompute_totals(conn, now)
        return await _read_node(conn, spec.name)

    return await (trail or Audited(None)).write(store, work, what=f"update node {spec.name}")


async def remove(store: Store, name: str, trail: Audited[None] | None = None) -> None:
    """Delete a node that holds no placement, and take its limits out of the cluster totals."""
    check_node_name(name)

    async def work(conn: AsyncConnection) -> None:
        now = store.now_epoch()
        await lock_cluster(conn)
        # Holding the node's lock, no admission can add a placement to it before the DELETE.
        if await lock(conn, nodes, nodes.c.name == name) == 0:
            raise NodeNotFound(name)
        count_query = sa.select(sa.func.count()).where(placements.c.node == name)
        held = int((await conn.execute(count_query)).scalar_one())
        if held:
            raise NodeBusy(name, held)
        await conn.execute(sa.delete(nodes).where(nodes.c.name == name))
        await recompute_totals(conn, now)

    await (trail or Audited(None)).write(store, work, what=f"remove node {name}")


async def set_columns(
    store: Store,
    name: str,
    values: dict[str, Any],
    what: str,
    trail: Audited[NodeState] | None = None,
) -> NodeState:
    """Update plain node columns (metrics, schedulable) and return the node; ``trail``'s
    events commit with the change."""
    check_node_name(name)

    async def work(conn: AsyncConnection) -> NodeState:
        stamped = {**values, "updated_at": store.now_epoch()}
        if await update(conn, nodes, nodes.c.name == name, stamped) == 0:
            raise NodeNotFound(name)
        return await _read_node(conn, name)

    return await (trail or Audited(None)).write(store, work, what=f"{what} {name}")


async def publish_metrics(store: Store, name: str, metrics: NodeMetrics) -> NodeState:
    """Record a node's published load and schedulable threads."""
    values = {
        "cpu_load_1": metrics.cpu_load_1,
        "cpu_schedulable": metrics.cpu_schedulable,
        "metrics_at": store.now_epoch(),
    }
    return await set_columns(store, name, values, "publish metrics of")


async def set_schedulable(
    store: Store, name: str, schedulable: bool, trail: Audited[NodeState] | None = None
) -> NodeState:
    """Cordon (False) or uncordon (True) a node."""
    what = "uncordon" if schedulable else "cordon"
    return await set_columns(store, name, {"schedulable": schedulable}, what, trail)
