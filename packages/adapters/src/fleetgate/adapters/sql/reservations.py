"""Room reservations in the ledger (``capacity.reservations``): reserve, end, expire, read.

A reservation is charged to its destination node's ``used`` counters by the same guarded UPDATE
an admission's node charge uses (``admission.charge_node``), so every admission path (in-process,
group commit, the PostgreSQL function) sees reserved room as taken and none of them changes. The
cluster and claim counters are not charged: the placement already counts there once.

Locks (decisions.md 16, docs/capacity.md): a reserve takes the cluster row first (class 3; it
serialises the reserves and orders them after any admission already past its namespace side),
then every node row it touches by name (class 4: the destinations it charges and the nodes of
the reservations it replaces), and inserts last. A reservation row is written only by a
transaction that holds its node's row lock (a reserve, a move, an end, the reconciler, which
locks every node), so a reservation row behaves as part of its node and a DELETE's rowcount
says whether it was still there to credit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from fleetgate.adapters.sql.admission import Refused, charge_node
from fleetgate.adapters.sql.engine import Store
from fleetgate.adapters.sql.events import Audited
from fleetgate.adapters.sql.guarded import lock, lock_and_read
from fleetgate.adapters.sql.rows import resources
from fleetgate.adapters.sql.schema import CLUSTER_ID, cluster, nodes, placements, reservations
from fleetgate.adapters.sql.sqltypes import epoch, instant
from fleetgate.domain.capacity.dimensions import ALLOCATION, Resources
from fleetgate.domain.capacity.model import MoveRequest
from fleetgate.domain.capacity.reservations import (
    Reservation,
    ReservationRequest,
    Reserved,
    per_node,
)


@dataclass(frozen=True)
class _Stored:
    placement: str
    node: str
    owner: str
    resources: Resources


def _reservation(row: sa.RowMapping) -> Reservation:
    return Reservation(
        placement=row["placement_id"],
        node=row["node"],
        resources=resources(row),
        owner=row["owner"],
        expires_at=instant(float(row["expires_at"])),
    )


def _stored(row: sa.RowMapping) -> _Stored:
    return _Stored(row["placement_id"], row["node"], row["owner"], resources(row))


async def credit_node(conn: AsyncConnection, node: str, amount: Resources, now: float) -> None:
    """Floored credit of ``amount`` on ``node``'s used counters (the row locked here)."""
    if amount.is_zero():
        return
    key = nodes.c.name == node
    row = await lock_and_read(conn, nodes, key)
    after = resources(row, "used_").minus_floored(amount)
    values = {**{f"used_{d}": after.get(d) for d in ALLOCATION}, "updated_at": now}
    await conn.execute(sa.update(nodes).where(key).values(**values))


async def _end_on(conn: AsyncConnection, held: Iterable[_Stored]) -> tuple[int, Resources]:
    """Delete ``held`` (rows on one node whose lock this transaction holds); how many were
    still there, and Σ their resources (what to credit)."""
    count, ended = 0, Resources()
    for r in held:
        gone = await conn.execute(
            sa.delete(reservations).where(
                reservations.c.placement_id == r.placement, reservations.c.node == r.node
            )
        )
        if int(gone.rowcount) == 1:
            count, ended = count + 1, ended.plus(r.resources)
    return count, ended


async def reserve(
    store: Store,
    owner: str,
    requests: Sequence[ReservationRequest],
    trail: Audited[Reserved] | None = None,
) -> Reserved:
    """Replace ``owner``'s reservations with ``requests``, all or none (one transaction)."""
    wanted = {r.reservation.placement for r in requests}

    async def work(conn: AsyncConnection) -> Reserved:
        now = store.now_epoch()
        await lock(conn, cluster, cluster.c.id == CLUSTER_ID)
        old_rows = await conn.execute(
            sa.select(reservations).where(
                sa.or_(
                    reservations.c.owner == owner,
                    reservations.c.placement_id.in_(sorted(wanted)),
                )
            )
        )
        old = [_stored(r) for r in old_rows.mappings()]
        names = sorted({r.node for r in old} | {r.reservation.node for r in requests})
        for name in names:
            # A node gone since the plan was read took its reservations with it (CASCADE), and
            # has no room to reserve: a refusal, like a full one.
            present = await lock(conn, nodes, nodes.c.name == name) == 1
            if present:
                # Its own room first: what the owner held here is credited before it is charged.
                _, ended = await _end_on(conn, (r for r in old if r.node == name))
                await credit_node(conn, name, ended, now)
            for request in requests:
                held = request.reservation
                if held.node != name:
                    continue
                if not present:
                    raise _Refusal(held)
                # No demand of its own (capacity.reservations): the guard at the plan's load.
                move = MoveRequest(held.placement, name, 0.0, request.target_load, True)
                try:
                    await charge_node(conn, name, move, held.resources, now)
                except Refused as refused:
                    raise _Refusal(held) from refused
        if requests:
            await conn.execute(
                sa.insert(reservations),
                [
                    {
                        "placement_id": r.reservation.placement,
                        "node": r.reservation.node,
                        "owner": owner,
                        **r.reservation.resources.as_dict(),
                        "expires_at": epoch(r.reservation.expires_at),
                        "created_at": now,
                    }
                    for r in requests
                ],
            )
        return Reserved(made=True)

    try:
        return await (trail or Audited(None)).write(store, work, what=f"reserve for {owner}")
    except _Refusal as refusal:
        return Reserved(made=False, refused=refusal.reservation)


class _Refusal(Exception):
    """A destination refused its reservation: the whole reserve rolls back."""

    def __init__(self, reservation: Reservation) -> None:
        super().__init__(reservation.node)
        self.reservation = reservation


async def end(store: Store, owner: str) -> int:
    """Delete ``owner``'s reservations, crediting their nodes; how many ended."""

    async def work(conn: AsyncConnection) -> int:
        now = store.now_epoch()
        rows = await conn.execute(sa.select(reservations).where(reservations.c.owner == owner))
        held = [_stored(r) for r in rows.mappings()]
        count = 0
        for name in sorted({r.node for r in held}):
            await lock(conn, nodes, nodes.c.name == name)
            ended, amount = await _end_on(conn, (r for r in held if r.node == name))
            await credit_node(conn, name, amount, now)
            count += ended
        return count

    return await store.write(work, what=f"end reservations of {owner}")


async def listed(store: Store, owner: str | None = None) -> list[Reservation]:
    """The stored reservations (of ``owner``, or all), by placement id."""
    query = sa.select(reservations).order_by(reservations.c.placement_id)
    if owner is not None:
        query = query.where(reservations.c.owner == owner)

    async def work(conn: AsyncConnection) -> list[Reservation]:
        return [_reservation(r) for r in (await conn.execute(query)).mappings()]

    return await store.read(work, what="read reservations")


async def held_for(conn: AsyncConnection, placement_id: str) -> Reservation | None:
    """The reservation held for ``placement_id`` (inside a move, after its placement lock)."""
    rows = await conn.execute(
        sa.select(reservations).where(reservations.c.placement_id == placement_id)
    )
    row = rows.mappings().first()
    return None if row is None else _reservation(row)


async def consume(conn: AsyncConnection, held: Reservation) -> bool:
    """End ``held`` inside a move that holds its node's lock; False when it was gone already."""
    stored = _Stored(held.placement, held.node, held.owner, held.resources)
    ended, _ = await _end_on(conn, [stored])
    return ended == 1


async def expire(conn: AsyncConnection, now: float) -> dict[str, Resources]:
    """Delete the reservations that no longer hold room (expired, or whose placement is no
    longer on its owner: released, or moved by someone else), crediting their nodes; inside the
    reconcile pass, which holds every node's lock. Σ credited per node."""
    on_owner = sa.exists().where(
        placements.c.id == reservations.c.placement_id,
        placements.c.node == reservations.c.owner,
    )
    rows = await conn.execute(
        sa.select(reservations).where(sa.or_(reservations.c.expires_at <= now, ~on_owner))
    )
    stale = [_stored(r) for r in rows.mappings()]
    credited: dict[str, Resources] = {}
    for name in sorted({r.node for r in stale}):
        _, ended = await _end_on(conn, (r for r in stale if r.node == name))
        await credit_node(conn, name, ended, now)
        credited[name] = ended
    return credited


async def reserved_by_node(conn: AsyncConnection) -> dict[str, Resources]:
    """Σ the stored reservations per node (the reconcile pass's recompute adds them)."""
    rows = await conn.execute(sa.select(reservations))
    return dict(per_node(_reservation(r) for r in rows.mappings()))


__all__ = [
    "consume",
    "credit_node",
    "end",
    "expire",
    "held_for",
    "listed",
    "reserve",
    "reserved_by_node",
]
