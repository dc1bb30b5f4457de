"""The ledger's reads for the API and the services: nodes, placements, the cluster row.

Each read is its own short read-only transaction (a plain ``BEGIN`` on SQLite, so readers never
wait for the writer). None of them runs inside an admission: a leading SELECT there is exactly
what the guarded-UPDATE-first rule forbids.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from fleetgate.adapters.sql.engine import Store
from fleetgate.adapters.sql.rows import cluster_state, node_state, node_states, placement
from fleetgate.adapters.sql.schema import CLUSTER_ID, cluster, nodes, placements
from fleetgate.domain.capacity.errors import LedgerError
from fleetgate.domain.capacity.model import ClusterState, NodeState, Placement


async def all_nodes(
    store: Store, *, after: str | None = None, limit: int | None = None
) -> list[NodeState]:
    """Every node by name; or one keyset page: names after ``after``, at most ``limit``."""
    query = sa.select(nodes).order_by(nodes.c.name)
    if after is not None:
        query = query.where(nodes.c.name > after)
    if limit is not None:
        query = query.limit(limit)

    async def work(conn: AsyncConnection) -> list[NodeState]:
        result = await conn.execute(query)
        return node_states(list(result.keys()), result.all())

    return await store.read_one(work, what="read nodes")


async def one_node(store: Store, name: str) -> NodeState | None:
    """One node, or None."""

    async def work(conn: AsyncConnection) -> NodeState | None:
        row = (await conn.execute(sa.select(nodes).where(nodes.c.name == name))).mappings().first()
        return None if row is None else node_state(row)

    return await store.read(work, what=f"read node {name}")


async def placements_where(
    store: Store,
    namespace: str | None = None,
    node: str | None = None,
    *,
    after: str | None = None,
    limit: int | None = None,
) -> list[Placement]:
    """Placements filtered by namespace and/or node: all of them oldest first, or a page by id.

    A page (``after`` or ``limit`` given) is ordered by id, the primary key, because a keyset
    needs a unique order that a concurrent insert cannot shift: ``id > after`` resumes exactly
    where the previous page stopped, where an offset would skip or repeat rows.
    """
    if after is None and limit is None:
        query = sa.select(placements).order_by(placements.c.admitted_at, placements.c.id)
    else:
        query = sa.select(placements).order_by(placements.c.id)
        if after is not None:
            query = query.where(placements.c.id > after)
        if limit is not None:
            query = query.limit(limit)
    if namespace is not None:
        query = query.where(placements.c.namespace == namespace)
    if node is not None:
        query = query.where(placements.c.node == node)

    async def work(conn: AsyncConnection) -> list[Placement]:
        return [placement(r) for r in (await conn.execute(query)).mappings()]

    return await store.read(work, what="read placements")


async def one_placement(store: Store, placement_id: str) -> Placement | None:
    """One placement, or None."""
    query = sa.select(placements).where(placements.c.id == placement_id)

    async def work(conn: AsyncConnection) -> Placement | None:
        row = (await conn.execute(query)).mappings().first()
        return None if row is None else placement(row)

    return await store.read(work, what="read placement")


async def placement_by_request(store: Store, namespace: str, request_id: str) -> Placement | None:
    """The placement admitted for ``(namespace, request_id)``, or None."""
    query = sa.select(placements).where(
        placements.c.namespace == namespace, placements.c.request_id == request_id
    )

    async def work(conn: AsyncConnection) -> Placement | None:
        row = (await conn.execute(query)).mappings().first()
        return None if row is None else placement(row)

    return await store.read_one(work, what="read placement by request id")


async def cluster_row(store: Store) -> ClusterState:
    """The cluster singleton."""

    async def work(conn: AsyncConnection) -> ClusterState:
        query = sa.select(cluster).where(cluster.c.id == CLUSTER_ID)
        row = (await conn.execute(query)).mappings().first()
        if row is None:
            raise LedgerError("the cluster row is missing: run `fleetgate db upgrade`")
        return cluster_state(row)

    return await store.read(work, what="read cluster")
