"""The admission transaction: namespace side, then the node, then the placement row.

1. Namespace side. The namespace's active, unexpired claim is charged (hard enforcement: under
   the claim guard; advisory: always, reporting the dimensions that went over). The claim's
   *overage* — usage above its limit — is also charged to the cluster's unclaimed sums, under the
   cluster guard, so advisory claims cannot over-commit the cluster. A namespace without an
   active claim is charged to the cluster under ``unclaimed_used + x <= total − claimed``.
2. The node row, under the node guard (schedulable, three allocations, demand clause), adding
   the placement's demand charge to ``expected_demand``.
3. The placement row. ``UNIQUE(namespace, request_id)`` makes two racing identical requests
   unable to both commit: the loser rolls back and returns the winner's placement.

The first statement is always an UPDATE. A refusal rolls everything back.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import RowMapping
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from fleetgate.adapters.sql import prepared, reads
from fleetgate.adapters.sql.dialect import error_code
from fleetgate.adapters.sql.engine import Store
from fleetgate.adapters.sql.guarded import RowMissing, charge, read_locked
from fleetgate.adapters.sql.retry import ATTEMPTS
from fleetgate.adapters.sql.rows import guard_row, node_state, resources
from fleetgate.adapters.sql.schema import CLUSTER_ID, claims, cluster, nodes, placements
from fleetgate.adapters.sql.sqltypes import instant, integer, real
from fleetgate.domain.capacity.denials import Denial, DimensionDetail, over_limit
from fleetgate.domain.capacity.dimensions import ALLOCATION, Resources
from fleetgate.domain.capacity.errors import LedgerError, LedgerUnavailable, NodeNotFound
from fleetgate.domain.capacity.guards import CLAIM_GUARD, CLUSTER_GUARD, node_guard
from fleetgate.domain.capacity.model import Admission, AdmitRequest, Placement
from fleetgate.domain.capacity.overage import overage_increase

ADVISORY = "advisory"
HARD = "hard"


class ClaimAppeared(Exception):
    """A claim for the namespace committed while this admission waited for the cluster row."""


async def claim_committed_meanwhile(conn: AsyncConnection, namespace: str, now: float) -> bool:
    """Whether the namespace has an active claim now that we hold the cluster row.

    A claim create holds the cluster row until it commits, so from here every claim created for
    the namespace is visible. PostgreSQL re-checks only the cluster row's own WHERE after the
    wait, so without this an admission that looked for the claim just before it was committed
    would charge the unclaimed side for usage the claim has just taken over. A locking read,
    so no snapshot is opened before the node's UPDATE.

    It never waits (NOWAIT): this read takes the claim row after the cluster row, the reverse
    of every claim write (delete, update, release), so waiting here could close a cycle. A row
    another write holds is a claim that exists: the admission runs again, and then waits for it
    in the canonical order, claim first.
    """
    try:
        found = await conn.execute(_CLAIM_NOW, {"k_namespace": namespace, "k_now": now})
    except DBAPIError as exc:
        if error_code(exc) in _LOCK_HELD:
            return True
        raise
    return found.first() is not None


#: "Lock not available" under NOWAIT: PostgreSQL 55P03, MariaDB 1205.
_LOCK_HELD = frozenset({"55P03", 1205})


_CLAIM_NOW = (
    sa.select(claims.c.id)
    .where(
        claims.c.active_namespace == sa.bindparam("k_namespace"),
        claims.c.expires_at > sa.bindparam("k_now"),
    )
    .with_for_update(read=True, nowait=True)
)


class Refused(Exception):
    """Raised inside the transaction to roll it back; carries the denial out."""

    def __init__(self, denial: Denial) -> None:
        super().__init__(denial.describe())
        self.denial = denial


@dataclass(frozen=True)
class ClaimCharge:
    """What charging the namespace's claim did."""

    claim_id: str
    over_limit: tuple[DimensionDetail, ...]
    overage: Resources
    bypassed: Denial | None


def increments(table: sa.Table, prefix: str, amount: Resources) -> dict[str, Any]:
    """``{prefix}d = {prefix}d + amount_d`` for each dimension."""
    return {f"{prefix}{d}": table.c[f"{prefix}{d}"] + integer(amount.get(d)) for d in ALLOCATION}


def bumps(prefix: str, amount: Resources, now: float) -> dict[prepared.Set, Any]:
    """``increments`` and ``updated_at = now`` as the SET clauses of a prepared statement."""
    sets: dict[prepared.Set, Any] = {
        prepared.Bump(f"{prefix}{d}"): amount.get(d) for d in ALLOCATION
    }
    sets[prepared.Assign("updated_at")] = now
    return sets


async def charge_claim(
    conn: AsyncConnection, request: AdmitRequest, now: float, enforcement: str
) -> ClaimCharge | None:
    """Charge the namespace's active claim; None when it has none (expired claims don't count)."""
    x = request.resources
    params = request.guard_params()
    hard = enforcement == HARD
    bypassed = None
    active = sa.and_(claims.c.active_namespace == request.namespace, claims.c.expires_at > now)
    if hard and not request.enforce:
        values = {**increments(claims, "used_", x), "updated_at": now}
        try:
            made = await charge(conn, claims, active, CLAIM_GUARD, params, values, enforce=False)
        except RowMissing:
            return None
        bypassed = made.bypassed
    else:
        # The common case runs prepared (advisory: unguarded; hard: under the claim guard).
        keys = {("active_namespace", "eq"): request.namespace, ("expires_at", "gt"): now}
        statement, binds = prepared.guarded_update(
            claims, keys, CLAIM_GUARD if hard else None, params, bumps("used_", x, now)
        )
        if int((await conn.execute(statement, binds)).rowcount) == 0:
            if not hard:
                return None  # no active claim
            values = {**increments(claims, "used_", x), "updated_at": now}
            try:
                made = await charge(conn, claims, active, CLAIM_GUARD, params, values, tried=True)
            except RowMissing:
                return None
            if made.denial is not None:
                raise Refused(made.denial)
    row = await read_locked(conn, claims, active)
    if row is None:  # pragma: no cover - we hold the claim's lock
        raise LedgerError("the charged claim vanished inside its own transaction")
    limit = resources(row, "limit_")
    used_before = resources(row, "used_").minus_floored(x)
    before = dict(guard_row(row))
    before.update({f"used_{d}": used_before.get(d) for d in ALLOCATION})
    return ClaimCharge(
        claim_id=str(row["id"]),
        over_limit=() if hard else over_limit(CLAIM_GUARD, before, params),
        overage=overage_increase(limit, used_before, x),
        bypassed=bypassed,
    )


async def charge_cluster(
    conn: AsyncConnection, amount: Resources, now: float, enforce: bool
) -> Denial | None:
    """Charge ``amount`` to the unclaimed sums under the cluster guard; returns any bypass."""
    params = amount.as_dict()
    if enforce:
        statement, binds = prepared.guarded_update(
            cluster,
            {("id", "eq"): CLUSTER_ID},
            CLUSTER_GUARD,
            params,
            bumps("unclaimed_used_", amount, now),
        )
        if int((await conn.execute(statement, binds)).rowcount) == 1:
            return None
    key = cluster.c.id == CLUSTER_ID
    values = {**increments(cluster, "unclaimed_used_", amount), "updated_at": now}
    try:
        made = await charge(
            conn, cluster, key, CLUSTER_GUARD, params, values, enforce=enforce, tried=enforce
        )
    except RowMissing as exc:
        raise LedgerError("the cluster row is missing: run `fleetgate db upgrade`") from exc
    if made.denial is not None:
        raise Refused(made.denial)
    return made.bypassed


@dataclass(frozen=True)
class NodeCharge:
    """What charging the node did: any bypassed guard, and the charged row when it came back."""

    bypassed: Denial | None
    row: RowMapping | None = None


async def charge_node(conn: AsyncConnection, request: AdmitRequest, now: float) -> NodeCharge:
    """Charge the node under the node guard, adding the demand charge.

    Where the dialect has ``UPDATE … RETURNING`` (PostgreSQL, SQLite) the guarded UPDATE returns
    the charged row, so the admission needs no read of it afterwards: one round trip fewer.
    """
    guard, params = node_guard(request.target_load), request.guard_params()
    if request.enforce:
        sets = bumps("used_", request.resources, now)
        sets[prepared.Bump("expected_demand", real=True)] = request.demand
        key = {("name", "eq"): request.node}
        returning = conn.dialect.update_returning
        statement, binds = prepared.guarded_update(
            nodes, key, guard, params, sets, returning=returning
        )
        result = await conn.execute(statement, binds)
        if returning:
            row = result.mappings().first()
            if row is not None:
                return NodeCharge(None, row)
        elif int(result.rowcount) == 1:
            return NodeCharge(None)
    values = {
        **increments(nodes, "used_", request.resources),
        "expected_demand": nodes.c.expected_demand + real(request.demand),
        "updated_at": now,
    }
    try:
        made = await charge(
            conn,
            nodes,
            nodes.c.name == request.node,
            guard,
            params,
            values,
            enforce=request.enforce,
            tried=request.enforce,
        )
    except RowMissing as exc:
        raise NodeNotFound(request.node) from exc
    if made.denial is not None:
        raise Refused(made.denial)
    return NodeCharge(made.bypassed)


async def admit_in(
    conn: AsyncConnection, request: AdmitRequest, placement_id: str, now: float, enforcement: str
) -> Admission:
    """The whole admission inside one transaction (raises Refused to roll back)."""
    claimed = await charge_claim(conn, request, now, enforcement)
    bypassed: list[Denial] = []
    if claimed is None:
        by = await charge_cluster(conn, request.resources, now, request.enforce)
        if await claim_committed_meanwhile(conn, request.namespace, now):
            raise ClaimAppeared(request.namespace)
    else:
        bypassed += [claimed.bypassed] if claimed.bypassed else []
        by = None
        if not claimed.overage.is_zero():
            by = await charge_cluster(conn, claimed.overage, now, request.enforce)
    bypassed += [by] if by else []
    node = await charge_node(conn, request, now)
    bypassed += [node.bypassed] if node.bypassed else []
    x = request.resources
    await conn.execute(
        prepared.insert(placements),
        {
            "id": placement_id,
            "namespace": request.namespace,
            "node": request.node,
            "cpus": x.cpus,
            "memory_mb": x.memory_mb,
            "disk_gb": x.disk_gb,
            "demand": request.demand,
            "admitted_at": now,
            "request_id": request.request_id,
            "claim_id": None if claimed is None else claimed.claim_id,
        },
    )
    node_row = node.row
    if node_row is None:
        locked = prepared.locked_row(nodes, "name")
        node_row = (await conn.execute(locked, {"k_name": request.node})).mappings().first()
        assert node_row is not None  # we hold its lock
    return Admission(
        placement=Placement(
            id=placement_id,
            namespace=request.namespace,
            node=request.node,
            resources=x,
            demand=request.demand,
            admitted_at=instant(now),
            request_id=request.request_id,
            claim_id=None if claimed is None else claimed.claim_id,
        ),
        node=node_state(node_row),
        claim_id=None if claimed is None else claimed.claim_id,
        claim_over_limit=() if claimed is None else claimed.over_limit,
        bypassed=tuple(bypassed),
    )


async def admit(store: Store, request: AdmitRequest, enforcement: str = ADVISORY) -> Admission:
    """Admit ``request`` (idempotently by request id) or return the refusal."""
    if enforcement not in (ADVISORY, HARD):
        raise ValueError(f"claims.enforcement: must be 'advisory' or 'hard', got {enforcement!r}")
    # No read for an earlier placement with this request id first: a repeat is rare, and the
    # UNIQUE(namespace, request_id) constraint finds it anyway (its INSERT fails, everything
    # rolls back, and the earlier placement is the answer), so a first request pays nothing
    # for idempotency.
    placement_id = request.placement_id or str(uuid.uuid4())

    async def work(conn: AsyncConnection) -> Admission:
        return await admit_in(conn, request, placement_id, store.now_epoch(), enforcement)

    try:
        for _ in range(ATTEMPTS):
            try:
                return await store.write(work, what=f"admit onto {request.node}")
            except ClaimAppeared:
                continue  # run again: the claim is visible now, so this time it is charged
        raise LedgerUnavailable(
            f"admit onto {request.node}: claims of {request.namespace} kept changing"
        )
    except Refused as refused:
        replay = await _replay(store, request)
        return replay or Admission(denial=refused.denial)
    except NodeNotFound:
        # A repeat whose node has left since answers with its placement, as any repeat does.
        replay = await _replay(store, request)
        if replay is None:
            raise
        return replay
    except IntegrityError:
        # A racing request with the same id committed first: answer with its placement.
        replay = await _replay(store, request)
        if replay is None:
            raise
        return replay


async def _replay(store: Store, request: AdmitRequest) -> Admission | None:
    if request.request_id is None:
        return None
    existing = await reads.placement_by_request(store, request.namespace, request.request_id)
    return None if existing is None else Admission(placement=existing, replayed=True)


__all__ = ["ADVISORY", "HARD", "Refused", "admit", "admit_in", "increments"]
