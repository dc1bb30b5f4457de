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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from fleetgate.adapters.sql import prepared, reads
from fleetgate.adapters.sql.dialect import error_code
from fleetgate.adapters.sql.engine import Store
from fleetgate.adapters.sql.events import Audited, insert_events
from fleetgate.adapters.sql.guarded import Charge, RowMissing, charge
from fleetgate.adapters.sql.rows import guard_row, node_state, resources
from fleetgate.adapters.sql.schema import CLUSTER_ID, claims, cluster, nodes, placements
from fleetgate.adapters.sql.sqltypes import instant
from fleetgate.domain.capacity.claims import ClaimCharge, ClaimEnforcement, claim_charge
from fleetgate.domain.capacity.denials import Denial, DimensionDetail, over_limit
from fleetgate.domain.capacity.dimensions import ALLOCATION, Resources
from fleetgate.domain.capacity.errors import LedgerError, LedgerUnavailable, NodeNotFound
from fleetgate.domain.capacity.guards import CLAIM_GUARD, CLUSTER_GUARD, node_guard
from fleetgate.domain.capacity.model import Admission, AdmitRequest, MoveRequest, Placement
from fleetgate.domain.capacity.overage import overage_increase
from fleetgate.domain.events import Event
from fleetgate.domain.ports import Audit


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
        found = await conn.execute(prepared.CLAIM_NOW, {"k_namespace": namespace, "k_now": now})
    except DBAPIError as exc:
        if lock_held(exc):
            return True
        raise
    return found.first() is not None


#: Fresh runs of an admission whose namespace's claim changed under it (its NOWAIT check met
#: a claim): each is a new transaction that then waits for the claim in order, so a few do.
RERUNS = 4
#: "Lock not available" under NOWAIT: PostgreSQL 55P03, MariaDB 1205.
_LOCK_HELD = frozenset({"55P03", 1205})


def lock_held(error: DBAPIError) -> bool:
    """Whether ``error`` is the NOWAIT claim check meeting a claim row another write holds."""
    return error_code(error) in _LOCK_HELD


class Refused(Exception):
    """Raised inside the transaction to roll it back; carries the denial out.

    ``repeat_checked``: the refusal was decided after looking for an earlier placement of the
    request id and finding none (the PostgreSQL function does), so no read of it follows.
    """

    def __init__(self, denial: Denial, *, repeat_checked: bool = False) -> None:
        super().__init__(denial.describe())
        self.denial = denial
        self.repeat_checked = repeat_checked


class NodeGone(NodeNotFound):
    """``NodeNotFound`` after looking for an earlier placement of the request id: there is none."""

    repeat_checked = True


class Duplicate(Exception):
    """The function found the request id already placed instead of answering its refusal."""


@dataclass(frozen=True)
class ChargedClaim:
    """What charging the namespace's claim did."""

    claim_id: str
    over_limit: tuple[DimensionDetail, ...]
    overage: Resources
    bypassed: Denial | None


def _active_claim(namespace: str, now: float) -> prepared.Keys:
    return {("active_namespace", "eq"): namespace, ("expires_at", "gt"): now}


async def charge_claim(
    conn: AsyncConnection, request: AdmitRequest, now: float, enforcement: ClaimEnforcement
) -> ChargedClaim | None:
    """Charge the namespace's active claim; None when it has none (expired claims don't count).

    How (under which guard, enforced or not, reporting what) is the domain's ``claim_charge``;
    this only carries it out, and reads the claim row only when there is one.
    """
    x, params = request.resources, request.guard_params()
    rule = claim_charge(enforcement, request.enforce)
    keys = _active_claim(request.namespace, now)
    returning = conn.dialect.update_returning
    try:
        made = await charge(
            conn,
            claims,
            keys,
            rule.guard,
            params,
            prepared.charge_sets("used_", x, now),
            enforce=rule.enforce,
            returning=returning,
        )
    except RowMissing:
        return None  # no active claim
    if made.denial is not None:
        raise Refused(made.denial)
    row: Mapping[Any, Any] | None = made.row
    if row is None:
        statement, binds = prepared.locked_row(claims, keys)
        row = (await conn.execute(statement, binds)).mappings().first()
        if row is None:  # pragma: no cover - we hold the claim's lock
            raise LedgerError("the charged claim vanished inside its own transaction")
    return charged_claim(row, request, rule, made.bypassed)


def charged_claim(
    row: Mapping[Any, Any], request: AdmitRequest, rule: ClaimCharge, bypassed: Denial | None
) -> ChargedClaim:
    """What charging the claim did, from its row after the charge (the overrun, the overage)."""
    x, params = request.resources, request.guard_params()
    limit = resources(row, "limit_")
    used_before = resources(row, "used_").minus_floored(x)
    over: tuple[DimensionDetail, ...] = ()
    if rule.reports_over_limit:
        before = dict(guard_row(row))
        before.update({f"used_{d}": used_before.get(d) for d in ALLOCATION})
        over = over_limit(CLAIM_GUARD, before, params)
    return ChargedClaim(
        claim_id=str(row["id"]),
        over_limit=over,
        overage=overage_increase(limit, used_before, x),
        bypassed=bypassed,
    )


_CLUSTER_KEY: prepared.Keys = {("id", "eq"): CLUSTER_ID}


async def charge_cluster(
    conn: AsyncConnection, amount: Resources, now: float, enforce: bool
) -> Denial | None:
    """Charge ``amount`` to the unclaimed sums under the cluster guard; returns any bypass."""
    sets = prepared.charge_sets("unclaimed_used_", amount, now)
    try:
        made = await charge(
            conn, cluster, _CLUSTER_KEY, CLUSTER_GUARD, amount.as_dict(), sets, enforce=enforce
        )
    except RowMissing as exc:
        raise LedgerError("the cluster row is missing: run `fleetgate db upgrade`") from exc
    if made.denial is not None:
        raise Refused(made.denial)
    return made.bypassed


async def charge_node(
    conn: AsyncConnection,
    node: str,
    request: AdmitRequest | MoveRequest,
    resources: Resources,
    now: float,
) -> Charge:
    """Charge ``node`` under the node guard, adding the demand charge (an admit's or a move's).

    Where the dialect has ``UPDATE … RETURNING`` (PostgreSQL, SQLite) the guarded UPDATE returns
    the charged row, so the admission needs no read of it afterwards: one round trip fewer.
    """
    params = {**resources.as_dict(), "demand": request.demand, "target_load": request.target_load}
    try:
        made = await charge(
            conn,
            nodes,
            {("name", "eq"): node},
            node_guard(request.target_load),
            params,
            prepared.charge_sets("used_", resources, now, demand=request.demand),
            enforce=request.enforce,
            returning=conn.dialect.update_returning,
        )
    except RowMissing as exc:
        raise NodeNotFound(node) from exc
    if made.denial is not None:
        raise Refused(made.denial)
    return made


async def admit_in(
    conn: AsyncConnection,
    request: AdmitRequest,
    placement_id: str,
    now: float,
    enforcement: ClaimEnforcement,
    audit: Audit | None = None,
) -> Admission:
    """The whole admission inside one transaction (raises Refused to roll back).

    ``audit`` gives the events that report the admission; they are inserted last, after the
    guarded UPDATEs, so they commit with it or not at all.
    """
    claimed = await charge_claim(conn, request, now, enforcement)
    if claimed is None:
        by = await charge_cluster(conn, request.resources, now, request.enforce)
        if await claim_committed_meanwhile(conn, request.namespace, now):
            raise ClaimAppeared(request.namespace)
        return await after_claim(conn, request, placement_id, now, None, [by] if by else [], audit)
    return await after_claim(conn, request, placement_id, now, claimed, [], audit)


async def after_claim(
    conn: AsyncConnection,
    request: AdmitRequest,
    placement_id: str,
    now: float,
    claimed: ChargedClaim | None,
    bypassed: list[Denial],
    audit: Audit | None,
) -> Admission:
    """The admission from the charged claim on: its overage, the node, the row, the audit."""
    if claimed is not None:
        bypassed += [claimed.bypassed] if claimed.bypassed else []
        if not claimed.overage.is_zero():
            by = await charge_cluster(conn, claimed.overage, now, request.enforce)
            bypassed += [by] if by else []
    node = await charge_node(conn, request.node, request, request.resources, now)
    bypassed += [node.bypassed] if node.bypassed else []
    return await record(conn, request, placement_id, now, claimed, node.row, bypassed, audit)


async def record(
    conn: AsyncConnection,
    request: AdmitRequest,
    placement_id: str,
    now: float,
    claimed: ChargedClaim | None,
    charged_node: Mapping[Any, Any] | None,
    bypassed: list[Denial],
    audit: Audit | None,
    *,
    inserted: bool = False,
) -> Admission:
    """Insert the placement row (unless ``inserted`` already), then the audit; the Admission."""
    x = request.resources
    claim_id = None if claimed is None else claimed.claim_id
    if not inserted:
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
                "claim_id": claim_id,
            },
        )
    node_row = charged_node
    if node_row is None:
        statement, binds = prepared.locked_row(nodes, {("name", "eq"): request.node})
        node_row = (await conn.execute(statement, binds)).mappings().first()
        assert node_row is not None  # we hold its lock
    admission = Admission(
        placement=Placement(
            id=placement_id,
            namespace=request.namespace,
            node=request.node,
            resources=x,
            demand=request.demand,
            admitted_at=instant(now),
            request_id=request.request_id,
            claim_id=claim_id,
        ),
        node=node_state(node_row),
        claim_id=claim_id,
        claim_over_limit=() if claimed is None else claimed.over_limit,
        bypassed=tuple(bypassed),
    )
    if audit is not None:
        await insert_events(conn, audit(admission))
    return admission


class Recheck(Exception):
    """The function's refused row admits under the lock after all: admit again, in-process."""


async def admit(
    store: Store,
    request: AdmitRequest,
    enforcement: ClaimEnforcement = ClaimEnforcement.ADVISORY,
    audit: Audit | None = None,
    committed: Callable[[Sequence[Event]], None] | None = None,
    *,
    one_call: bool = False,
) -> Admission:
    """Admit ``request`` (idempotently by request id) or return the refusal.

    The audit events of an admission commit with it; a replayed or refused request writes none.
    ``committed`` is told, after the commit, which events were written (those of the attempt
    that committed: a retried transaction asks ``audit`` again). ``one_call``: admit through
    the dialect's admission function (``DialectSupport.admit_by_function``) where the request
    allows it.
    """
    # No read for an earlier placement with this request id first: a repeat is rare, and the
    # UNIQUE(namespace, request_id) constraint finds it anyway (its INSERT fails, everything
    # rolls back, and the earlier placement is the answer), so a first request pays nothing
    # for idempotency.
    placement_id = request.placement_id or str(uuid.uuid4())

    trail = Audited(audit, committed)
    by_function = one_call and request.enforce

    async def work(conn: AsyncConnection) -> Admission:
        now = store.now_epoch()
        how = store.dialect.admit_by_function if by_function else admit_in
        return await how(
            conn,
            request,
            placement_id,
            now,
            enforcement,
            None if audit is None else trail.events_of,
        )

    try:
        for _ in range(RERUNS):
            try:
                trail.written = ()
                admission = await store.write(work, what=f"admit onto {request.node}")
                trail.done()
                return admission
            except ClaimAppeared:
                continue  # run again: the claim is visible now, so this time it is charged
            except Recheck:
                by_function = False  # rolled back: the in-process path re-reads under lock
            except Duplicate:
                # Read as the UNIQUE key's repeat is (below); released since, its request id
                # is free again and the request is admitted afresh.
                replay = await replay_of(store, request)
                if replay is not None:
                    return replay
        raise LedgerUnavailable(
            f"admit onto {request.node}: claims of {request.namespace} kept changing"
        )
    except (Refused, NodeNotFound, IntegrityError) as exc:
        # One answer for all three: a repeat of an earlier request answers with its placement
        # (a racing twin committed first, its node has left since, or it no longer fits);
        # otherwise a refusal is the result and anything else is raised as it was. The
        # function looked for the placement already (``repeat_checked``): no second read.
        checked = isinstance(exc, Refused | NodeGone) and exc.repeat_checked
        replay = None if checked else await replay_of(store, request)
        if replay is not None:
            return replay
        if isinstance(exc, Refused):
            return Admission(denial=exc.denial)
        raise


async def replay_of(store: Store, request: AdmitRequest) -> Admission | None:
    """The earlier placement of a repeated request id, as a replay; None for a new request."""
    if request.request_id is None:
        return None
    existing = await reads.placement_by_request(store, request.namespace, request.request_id)
    return None if existing is None else Admission(placement=existing, replayed=True)


__all__ = ["Audit", "Refused", "admit", "admit_in", "charge_node", "replay_of"]
