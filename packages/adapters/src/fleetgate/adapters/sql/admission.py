"""The admission on SQL: the domain's sequence carried out in one transaction, retried here.

The sequence of steps (claim, cluster, node, placement, audit) and every decision in it are the
domain's (``fleetgate.domain.capacity.admission``); :class:`SqlSteps` carries out each step as
the guarded UPDATE, locking read or INSERT it has always been, so the recorded lock order
holds. What stays here is what only a database has: the UNIQUE(namespace, request_id) key that
turns a racing repeat into an IntegrityError, the NOWAIT claim check that reports a claim
committed meanwhile (``ClaimAppeared``: run again), and the PostgreSQL function's outcomes
(``Recheck``, ``Duplicate``, ``NodeGone``) — each a way to say "undo, then answer or run again".

The first statement is always an UPDATE. A refusal rolls everything back.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from fleetgate.adapters.sql import prepared, reads
from fleetgate.adapters.sql.dialect import error_code
from fleetgate.adapters.sql.engine import Store
from fleetgate.adapters.sql.events import Audited, insert_events
from fleetgate.adapters.sql.guarded import Charge, RowMissing, charge
from fleetgate.adapters.sql.rows import node_state, resources
from fleetgate.adapters.sql.schema import CLUSTER_ID, claims, cluster, nodes, placements
from fleetgate.adapters.sql.sqltypes import instant
from fleetgate.domain.capacity import admission as sequence
from fleetgate.domain.capacity import charging
from fleetgate.domain.capacity.admission import ClaimAppeared
from fleetgate.domain.capacity.charging import Charged, ChargedClaim, ClaimCounters
from fleetgate.domain.capacity.claims import ClaimCharge, ClaimEnforcement
from fleetgate.domain.capacity.denials import Denial
from fleetgate.domain.capacity.dimensions import Resources
from fleetgate.domain.capacity.errors import LedgerError, LedgerUnavailable, NodeNotFound
from fleetgate.domain.capacity.guards import CLUSTER_GUARD, node_guard
from fleetgate.domain.capacity.model import (
    Admission,
    AdmitRequest,
    MoveRequest,
    NodeState,
    Placement,
)
from fleetgate.domain.events import Event
from fleetgate.domain.ports import Audit


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


def _active_claim(namespace: str, now: float) -> prepared.Keys:
    return {("active_namespace", "eq"): namespace, ("expires_at", "gt"): now}


def claim_counters(row: Mapping[Any, Any]) -> ClaimCounters:
    """A claim row's id and counters, as the domain's admission reads them."""
    return ClaimCounters(str(row["id"]), resources(row, "limit_"), resources(row, "used_"))


def charged_claim(
    row: Mapping[Any, Any], request: AdmitRequest, rule: ClaimCharge, bypassed: Denial | None
) -> ChargedClaim:
    """What charging the claim did, from its row after the charge (the domain's reading)."""
    return charging.charged_claim(claim_counters(row), request, rule, bypassed)


_CLUSTER_KEY: prepared.Keys = {("id", "eq"): CLUSTER_ID}


async def node_charge(
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
        return await charge(
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


async def charge_node(
    conn: AsyncConnection,
    node: str,
    request: AdmitRequest | MoveRequest,
    resources: Resources,
    now: float,
) -> Charge:
    """``node_charge`` for a move or a reservation: a refusal raises Refused (rolls back)."""
    made = await node_charge(conn, node, request, resources, now)
    if made.denial is not None:
        raise Refused(made.denial)
    return made


class SqlSteps:
    """The admission's primitives (``ports.AdmissionSteps``) inside one open transaction.

    Each is the guarded UPDATE, locking read or INSERT the admission has always sent, in the
    order the domain's sequence asks for them (the recorded lock order: claim, cluster, node,
    placement). ``node_row``: the node as charged, when the caller has it already.
    """

    def __init__(
        self, conn: AsyncConnection, now: float, node_row: Mapping[Any, Any] | None = None
    ) -> None:
        self.conn = conn
        self.epoch = now
        self._now = instant(now)
        self._node_row = node_row

    @property
    def now(self) -> datetime:
        """The transaction's instant."""
        return self._now

    async def charge_claim(
        self, request: AdmitRequest, rule: ClaimCharge
    ) -> Charged[ClaimCounters] | None:
        """The claim's guarded UPDATE (``RETURNING`` it where the dialect can)."""
        conn, keys = self.conn, _active_claim(request.namespace, self.epoch)
        try:
            made = await charge(
                conn,
                claims,
                keys,
                rule.guard,
                request.guard_params(),
                prepared.charge_sets("used_", request.resources, self.epoch),
                enforce=rule.enforce,
                returning=conn.dialect.update_returning,
            )
        except RowMissing:
            return None  # no active claim
        if made.denial is not None:
            return Charged(denial=made.denial)
        row: Mapping[Any, Any] | None = made.row
        if row is None:
            statement, binds = prepared.locked_row(claims, keys)
            row = (await conn.execute(statement, binds)).mappings().first()
            if row is None:  # pragma: no cover - we hold the claim's lock
                raise LedgerError("the charged claim vanished inside its own transaction")
        return Charged(bypassed=made.bypassed, row=claim_counters(row))

    async def charge_cluster(self, amount: Resources, enforce: bool) -> Charged[None]:
        """The cluster row's guarded UPDATE of the unclaimed sums."""
        sets = prepared.charge_sets("unclaimed_used_", amount, self.epoch)
        try:
            made = await charge(
                self.conn,
                cluster,
                _CLUSTER_KEY,
                CLUSTER_GUARD,
                amount.as_dict(),
                sets,
                enforce=enforce,
            )
        except RowMissing as exc:
            raise LedgerError("the cluster row is missing: run `fleetgate db upgrade`") from exc
        return Charged(denial=made.denial, bypassed=made.bypassed)

    async def claim_appeared(self, namespace: str) -> bool:
        """The NOWAIT claim check (``claim_committed_meanwhile``)."""
        return await claim_committed_meanwhile(self.conn, namespace, self.epoch)

    async def charge_node(self, request: AdmitRequest) -> Charged[NodeState]:
        """The node's guarded UPDATE; the charged row is kept for ``charged_node``."""
        made = await node_charge(self.conn, request.node, request, request.resources, self.epoch)
        self._node_row = made.row
        return Charged(denial=made.denial, bypassed=made.bypassed)

    async def insert_placement(self, placement: Placement) -> None:
        """The placement's INSERT (its UNIQUE request id raises IntegrityError on a repeat)."""
        x = placement.resources
        await self.conn.execute(
            prepared.insert(placements),
            {
                "id": placement.id,
                "namespace": placement.namespace,
                "node": placement.node,
                "cpus": x.cpus,
                "memory_mb": x.memory_mb,
                "disk_gb": x.disk_gb,
                "demand": placement.demand,
                "admitted_at": self.epoch,
                "request_id": placement.request_id,
                "claim_id": placement.claim_id,
            },
        )

    async def charged_node(self, name: str) -> NodeState:
        """The row the guarded UPDATE returned, else a locking read of it (we hold its lock)."""
        node_row = self._node_row
        if node_row is None:
            statement, binds = prepared.locked_row(nodes, {("name", "eq"): name})
            node_row = (await self.conn.execute(statement, binds)).mappings().first()
            assert node_row is not None  # we hold its lock
        return node_state(node_row)

    async def record_events(self, events: Sequence[Event]) -> None:
        """The audit's INSERT, last in the transaction."""
        await insert_events(self.conn, events)


def _refused(made: Admission) -> Admission:
    """The domain's refusal raised as Refused: it rolls the transaction (or savepoint) back."""
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
    """The domain's admission inside one transaction (raises Refused to roll back).

    ``audit`` gives the events that report the admission; they are inserted last, after the
    guarded UPDATEs, so they commit with it or not at all.
    """
    steps = SqlSteps(conn, now)
    return _refused(await sequence.admit(steps, request, placement_id, enforcement, audit))


async def after_claim(
    conn: AsyncConnection,
    request: AdmitRequest,
    placement_id: str,
    now: float,
    claimed: ChargedClaim | None,
    bypassed: list[Denial],
    audit: Audit | None,
) -> Admission:
    """The domain's admission from the charged claim on (the function's advisory overrun)."""
    steps = SqlSteps(conn, now)
    made = await sequence.after_claim(steps, request, placement_id, claimed, bypassed, audit)
    return _refused(made)


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
    """The domain's last step (the placement unless ``inserted``, the audit); the Admission."""
    steps = SqlSteps(conn, now, charged_node)
    return await sequence.record(
        steps, request, placement_id, claimed, bypassed, audit, inserted=inserted
    )


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
    """The domain's one answer to "was this request id seen", over the placements' key."""

    async def seen(namespace: str, request_id: str) -> Placement | None:
        return await reads.placement_by_request(store, namespace, request_id)

    return await sequence.replay_of(seen, request)


__all__ = [
    "Audit",
    "ChargedClaim",
    "ClaimAppeared",
    "Refused",
    "SqlSteps",
    "admit",
    "admit_in",
    "charge_node",
    "replay_of",
]
