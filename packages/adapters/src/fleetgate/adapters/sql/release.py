"""Releasing and moving placements: floored credits, decayed demand, rows in canonical order.

A release and a move of the same placement serialise on the placement row, taken first, so
neither can credit twice; then the namespace side (release only), then node rows by name.

A release holds the rows others wait for (its claim, the cluster row, its node) for as few
round trips as it can, because every round trip is a wait in which an asyncio process serves
other requests while the rows stay locked (issue 45: PostgreSQL sessions idle in transaction,
blocking others). So it does all it can before the first of them: its first statement deletes
the placement and returns it (the row's lock and its read at once), the demand credit is
computed from it, and each of the hot rows is then credited by one guarded UPDATE
(``domain.capacity.credits``: the row holds the whole credit, a claim is within its limit), with
nothing read back. Only a row that guard refuses (a counter that drifted below the placement's
size, an advisory claim past its limit) is read under lock and credited the general way, which
a move always uses: floored at zero (a clamp is reported, never hidden), ``expected_demand``
credited with what remains of the placement's own decayed charge, so churn leaves no residue.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from fleetgate.adapters.sql import prepared, reservations
from fleetgate.adapters.sql.admission import Refused, charge_node
from fleetgate.adapters.sql.engine import Store
from fleetgate.adapters.sql.events import Audited
from fleetgate.adapters.sql.guarded import RowMissing, lock, lock_and_read, read_locked
from fleetgate.adapters.sql.rows import node_state, placement, resources
from fleetgate.adapters.sql.schema import CLUSTER_ID, claims, cluster, nodes, placements
from fleetgate.adapters.sql.sqltypes import epoch
from fleetgate.domain.capacity.credits import (
    CLAIM_CREDIT,
    CLUSTER_CREDIT,
    DEMAND_CREDIT,
    NODE_CREDIT,
)
from fleetgate.domain.capacity.demand import remaining
from fleetgate.domain.capacity.denials import Denial
from fleetgate.domain.capacity.dimensions import ALLOCATION, Resources
from fleetgate.domain.capacity.errors import PlacementNotFound
from fleetgate.domain.capacity.guards import Guard
from fleetgate.domain.capacity.model import Admission, MoveRequest, Placement, Release
from fleetgate.domain.capacity.overage import overage_decrease


def _absolute(prefix: str, amount: Resources) -> dict[str, Any]:
    return {f"{prefix}{d}": amount.get(d) for d in ALLOCATION}


def _clamps(before: Resources, credit: Resources) -> bool:
    return any(before.get(d) < credit.get(d) for d in ALLOCATION)


async def _lock_placement(
    conn: AsyncConnection, placement_id: str, namespace: str | None
) -> Placement | None:
    key = placements.c.id == placement_id
    if namespace is not None:
        key = sa.and_(key, placements.c.namespace == namespace)
    # placements has no updated_at; admitted_at = admitted_at is the no-op that takes the lock.
    result = await conn.execute(
        sa.update(placements).where(key).values(admitted_at=placements.c.admitted_at)
    )
    if result.rowcount == 0:
        return None
    row = await read_locked(conn, placements, key)
    return None if row is None else placement(row)


async def _delete_placement(
    conn: AsyncConnection, placement_id: str, namespace: str | None
) -> Placement | None:
    """Delete the placement and return it: the row's lock (class 1) and its read in one."""
    key = placements.c.id == placement_id
    if namespace is not None:
        key = sa.and_(key, placements.c.namespace == namespace)
    result = await conn.execute(sa.delete(placements).where(key).returning(*placements.c))
    row = result.mappings().first()
    return None if row is None else placement(dict(row))


async def _credit_whole(
    conn: AsyncConnection,
    table: sa.Table,
    keys: prepared.Keys,
    guard: Guard,
    prefix: str,
    amount: Resources,
    now: float,
    demand: float | None = None,
) -> bool:
    """Credit ``amount`` (and ``demand``) in one guarded UPDATE if ``guard`` (credits.py) holds:
    then nothing is floored or clamped. False: the row was not credited (the guard refused it,
    or no row has the key), for the caller to credit it from the row read under lock."""
    params: dict[str, float] = dict(amount.as_dict())
    if demand is not None:
        params[DEMAND_CREDIT.name] = demand
    sets = prepared.credit_sets(prefix, amount, now, demand)
    statement, binds = prepared.guarded_update(table, keys, guard, params, sets)
    return int((await conn.execute(statement, binds)).rowcount) == 1


async def _credit_cluster(conn: AsyncConnection, amount: Resources, now: float) -> bool:
    keys = {("id", "eq"): CLUSTER_ID}
    if await _credit_whole(conn, cluster, keys, CLUSTER_CREDIT, "unclaimed_used_", amount, now):
        return False
    row = await lock_and_read(conn, cluster, cluster.c.id == CLUSTER_ID)
    before = resources(row, "unclaimed_used_")
    values = {**_absolute("unclaimed_used_", before.minus_floored(amount)), "updated_at": now}
    await conn.execute(sa.update(cluster).where(cluster.c.id == CLUSTER_ID).values(**values))
    return _clamps(before, amount)


async def _credit_namespace(conn: AsyncConnection, p: Placement, now: float) -> bool:
    """Credit the claim the placement was charged to while it is active, else the cluster."""
    if p.claim_id is not None:
        keys = {("id", "eq"): p.claim_id, ("state", "eq"): "active"}
        if await _credit_whole(conn, claims, keys, CLAIM_CREDIT, "used_", p.resources, now):
            return False
        key = sa.and_(claims.c.id == p.claim_id, claims.c.state == "active")
        try:
            row = await lock_and_read(conn, claims, key)
        except RowMissing:
            row = None
        if row is not None:
            before = resources(row, "used_")
            values = {**_absolute("used_", before.minus_floored(p.resources)), "updated_at": now}
            await conn.execute(sa.update(claims).where(key).values(**values))
            shrink = overage_decrease(resources(row, "limit_"), before, p.resources)
            clamped = _clamps(before, p.resources)
            if not shrink.is_zero():
                clamped |= await _credit_cluster(conn, shrink, now)
            return clamped
    return await _credit_cluster(conn, p.resources, now)


async def _credit_node(
    conn: AsyncConnection, node: str, p: Placement, now: float, decay_seconds: float
) -> tuple[bool, float]:
    """Floored credit of the placement's size and its decayed demand on ``node``."""
    credit = remaining(p.demand, now - epoch(p.admitted_at), decay_seconds)
    whole = await _credit_whole(
        conn, nodes, {("name", "eq"): node}, NODE_CREDIT, "used_", p.resources, now, credit
    )
    if whole:
        return False, credit
    key = nodes.c.name == node
    try:
        row = await lock_and_read(conn, nodes, key)
    except RowMissing:
        return True, 0.0  # pragma: no cover - the foreign key keeps the node while placed
    before = resources(row, "used_")
    demand_before = float(row["expected_demand"])
    values = {
        **_absolute("used_", before.minus_floored(p.resources)),
        "expected_demand": max(0.0, demand_before - credit),
        "updated_at": now,
    }
    await conn.execute(sa.update(nodes).where(key).values(**values))
    return _clamps(before, p.resources), min(credit, demand_before)


async def _charge_demand(conn: AsyncConnection, node: str, demand: float, now: float) -> None:
    """Add a moved placement's demand charge to ``node`` (its room was reserved, so no guard)."""
    await conn.execute(
        sa.update(nodes)
        .where(nodes.c.name == node)
        .values(expected_demand=nodes.c.expected_demand + demand, updated_at=now)
    )


async def release(
    store: Store,
    placement_id: str,
    namespace: str | None,
    decay_seconds: float,
    trail: Audited[Release] | None = None,
) -> Release:
    """Delete the placement and credit everything it was charged; ``released`` false if gone.

    ``trail``'s events (built from the Release) commit in the release's transaction.
    """

    async def work(conn: AsyncConnection) -> Release:
        now = store.now_epoch()
        p = await _delete_placement(conn, placement_id, namespace)
        if p is None:
            return Release(released=False)
        clamped = await _credit_namespace(conn, p, now)
        node_clamped, credit = await _credit_node(conn, p.node, p, now, decay_seconds)
        return Release(
            released=True, placement=p, clamped=clamped or node_clamped, demand_credit=credit
        )

    return await (trail or Audited(None)).write(store, work, what=f"release {placement_id}")


async def move(
    store: Store,
    request: MoveRequest,
    decay_seconds: float,
    trail: Audited[Admission] | None = None,
) -> Admission:
    """Move a placement under the target node's guard; the old node is credited (floored).
    A move into the placement's reservation charges the target only its demand (the room is
    reserved); a move elsewhere hands the reserved room back.

    ``trail``'s events commit with the move; a refused move writes none (it rolls back).
    """

    async def work(conn: AsyncConnection) -> Admission:
        now = store.now_epoch()
        p = await _lock_placement(conn, request.placement_id, request.namespace)
        if p is None:
            raise PlacementNotFound(request.placement_id)
        if p.node == request.node:
            row = await read_locked(conn, nodes, nodes.c.name == p.node)
            return Admission(
                placement=p, node=None if row is None else node_state(row), claim_id=p.claim_id
            )
        bypassed: tuple[Denial, ...] = ()
        # A reservation held for the placement ends here (capacity.reservations); its row is
        # written only under its node's lock, taken below in the same name order.
        held = await reservations.held_for(conn, p.id)
        names = {p.node, request.node} | ({held.node} if held is not None else set())
        # The node rows in name order, so crossing moves cannot deadlock.
        for name in sorted(names):
            if name == p.node:
                await _credit_node(conn, p.node, p, now, decay_seconds)
                continue
            ended = False
            if held is not None and held.node == name:
                await lock(conn, nodes, nodes.c.name == name)
                ended = await reservations.consume(conn, held)
            if name != request.node:
                if ended and held is not None:  # reserved elsewhere: that room is handed back
                    await reservations.credit_node(conn, name, held.resources, now)
                continue
            if ended:
                # Into its reservation: the room is charged already; only the demand is new.
                await _charge_demand(conn, name, request.demand, now)
                continue
            made = await charge_node(conn, name, request, p.resources, now)
            bypassed = () if made.bypassed is None else (made.bypassed,)
        await conn.execute(
            sa.update(placements)
            .where(placements.c.id == p.id)
            .values(node=request.node, demand=request.demand, admitted_at=now)
        )
        moved = await read_locked(conn, placements, placements.c.id == p.id)
        target = await read_locked(conn, nodes, nodes.c.name == request.node)
        assert moved is not None and target is not None  # both locked by this transaction
        return Admission(
            placement=placement(moved),
            node=node_state(target),
            claim_id=p.claim_id,
            bypassed=bypassed,
        )

    try:
        return await (trail or Audited(None)).write(
            store, work, what=f"move {request.placement_id} to {request.node}"
        )
    except Refused as refused:
        return Admission(denial=refused.denial)


__all__ = ["lock", "move", "release"]
