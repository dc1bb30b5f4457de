"""An in-memory capacity ledger for tests whose subject is a service's logic, not SQL.

It implements every role of ``CapacityLedger`` and the ``TokenStore``, deciding with the same
domain rules the SQL ledger applies (the guards, ``claim_charge``, the overage, ``plan_create``,
``plan_update``, ``plan_release``, ``reconcile``); only the storage differs. Each write runs
without an await between what it reads and what it writes, so under asyncio it is as atomic as
a transaction; one that raises puts back the state it started from, its audit events included.
``tests/fakes/test_ledger.py`` holds it to the SQL ledger on every backend, so it cannot drift.
"""

from __future__ import annotations

import json
import time
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, TypeVar

from fleetgate.domain.capacity import admission
from fleetgate.domain.capacity.charging import Charged, ClaimCounters
from fleetgate.domain.capacity.claims import (
    Claim,
    ClaimCharge,
    ClaimDeletion,
    ClaimEnforcement,
    ClaimOutcome,
    ClaimRefusal,
    ClaimRequest,
    ClaimState,
    ClaimUpdate,
    RefusalReason,
    plan_create,
    plan_release,
    plan_update,
)
from fleetgate.domain.capacity.demand import DemandPolicy, age_seconds, remaining
from fleetgate.domain.capacity.denials import Denial, deny
from fleetgate.domain.capacity.dimensions import ALLOCATION, Overcommit, Resources, node_limits
from fleetgate.domain.capacity.errors import NodeBusy, NodeExists, NodeNotFound, PlacementNotFound
from fleetgate.domain.capacity.guards import CLUSTER_GUARD, Guard, node_guard
from fleetgate.domain.capacity.model import (
    Admission,
    AdmitRequest,
    ClusterState,
    MoveRequest,
    NodeMetrics,
    NodeSpec,
    NodeState,
    Placement,
    RecordedEvent,
    Release,
    check_namespace,
    check_node_name,
)
from fleetgate.domain.capacity.overage import overage_decrease
from fleetgate.domain.capacity.reconcile import (
    DemandCharge,
    NodeCounters,
    PassReport,
    Reconciliation,
    Snapshot,
    reconcile,
)
from fleetgate.domain.capacity.reservations import (
    Reservation,
    ReservationRequest,
    Reserved,
    live,
    per_node,
)
from fleetgate.domain.capacity.trial import claim_row
from fleetgate.domain.events import Event
from fleetgate.domain.ports import Audit, AuditOf, Clock, EventSink
from fleetgate.domain.tokens import DIGEST_LENGTH, ApiToken

R = TypeVar("R")
#: The most events one read returns (the SQL ledger's bound).
MAX_EVENTS = 1000
_NOTHING = Resources()


class _Refused(Exception):
    """Raised inside a write to undo it; carries the refusal out (an admission's or a claim's)."""

    def __init__(self, refusal: Denial | ClaimRefusal) -> None:
        super().__init__(str(refusal))
        self.refusal = refusal


class _ReserveRefused(Exception):
    """A destination refused its reservation: the whole reserve changes nothing."""

    def __init__(self, reservation: Reservation) -> None:
        super().__init__(reservation.node)
        self.reservation = reservation


@dataclass
class _Tables:
    """Everything the ledger holds. Values are immutable: a copy of the dicts is a snapshot."""

    cluster: ClusterState
    nodes: dict[str, NodeState] = field(default_factory=dict)
    placements: dict[str, Placement] = field(default_factory=dict)
    claims: dict[str, Claim] = field(default_factory=dict)
    events: list[RecordedEvent] = field(default_factory=list)
    tokens: dict[str, tuple[ApiToken, str]] = field(default_factory=dict)
    reservations: dict[str, Reservation] = field(default_factory=dict)

    def copy(self) -> _Tables:
        return _Tables(
            self.cluster,
            dict(self.nodes),
            dict(self.placements),
            dict(self.claims),
            list(self.events),
            dict(self.tokens),
            dict(self.reservations),
        )


def _stored(event: Event) -> Event:
    """The event as the audit table gives it back: bounded strings, JSON data."""

    def plain(value: object) -> str:
        return value.isoformat() if isinstance(value, datetime) else str(value)

    data = json.loads(json.dumps(event.data, default=plain))
    return replace(event, kind=event.kind[:128], subject=event.subject[:255], data=data)


def _clamps(before: Resources, credit: Resources) -> bool:
    return any(before.get(d) < credit.get(d) for d in ALLOCATION)


def _sum(amounts: Sequence[Resources]) -> Resources:
    return Resources(*(sum(a.get(d) for a in amounts) for d in ALLOCATION))


class _Taken(Exception):
    """The placement's ``(namespace, request_id)`` is taken (the SQL ledger's UNIQUE key)."""


class _Steps:
    """One admission's steps (``ports.AdmissionSteps``) on the ledger's dicts.

    A store, not an admission: each step does what it is asked and reports the guard's
    verdict; the sequence and its decisions are the domain's. No step awaits anything, so the
    whole admission runs without yielding: under asyncio it is as atomic as a transaction.
    """

    def __init__(self, ledger: InMemoryLedger) -> None:
        self.ledger = ledger
        self.tables = ledger._tables
        self._now = ledger.clock.now()
        self.written: tuple[Event, ...] = ()

    @property
    def now(self) -> datetime:
        """The write's instant."""
        return self._now

    async def charge_claim(
        self, request: AdmitRequest, rule: ClaimCharge
    ) -> Charged[ClaimCounters] | None:
        """Charge the namespace's active claim by ``rule``, or None without one."""
        claim = next(
            (
                c
                for c in self.tables.claims.values()
                if c.namespace == request.namespace and c.is_active(self._now)
            ),
            None,
        )
        if claim is None:
            return None
        params = request.guard_params()
        verdict = InMemoryLedger._verdict(rule.guard, claim_row(claim), params, rule.enforce)
        if verdict.denial is not None:
            return Charged(denial=verdict.denial)
        used = claim.used.plus(request.resources)
        self.tables.claims[claim.id] = replace(claim, used=used, updated_at=self._now)
        return Charged(bypassed=verdict.bypassed, row=ClaimCounters(claim.id, claim.limit, used))

    async def charge_cluster(self, amount: Resources, enforce: bool) -> Charged[None]:
        """Charge the unclaimed sums under the cluster guard."""
        row = self.tables.cluster
        verdict = InMemoryLedger._verdict(CLUSTER_GUARD, row.guard_row(), amount.as_dict(), enforce)
        if verdict.denial is None:
            used = row.unclaimed_used.plus(amount)
            self.tables.cluster = replace(row, unclaimed_used=used, updated_at=self._now)
        return verdict

    async def claim_appeared(self, namespace: str) -> bool:
        """Never: nothing commits while this write runs."""
        return False

    async def charge_node(self, request: AdmitRequest) -> Charged[NodeState]:
        """Charge the node under its guard (NodeNotFound if there is none)."""
        return self.ledger._node_charge(request.node, request.resources, request)

    async def insert_placement(self, placement: Placement) -> None:
        """Store the placement under its request id's key (``_Taken`` if that is taken)."""
        taken = placement.request_id is not None and self.ledger._by_request(
            placement.namespace, placement.request_id
        )
        if taken:
            raise _Taken(placement.request_id)
        self.tables.placements[placement.id] = placement

    async def charged_node(self, name: str) -> NodeState:
        """The node as charged."""
        return self.ledger._node(name)

    async def record_events(self, events: Sequence[Event]) -> None:
        """Append the audit events (the sink is told of them once the admission stands)."""
        self.written = tuple(events)
        self.ledger._append(self.written)


class InMemoryEventSink:
    """The ledger's EventSink: appends to its audit trail, skipping events a change committed."""

    def __init__(self, ledger: InMemoryLedger) -> None:
        self._ledger = ledger
        self._committed: weakref.WeakValueDictionary[int, Event] = weakref.WeakValueDictionary()

    def committed(self, batch: Sequence[Event]) -> None:
        """Note that ``batch`` is in the trail already (written by the change that made it)."""
        for event in batch:
            self._committed[id(event)] = event

    async def emit(self, events: Sequence[Event]) -> None:
        """Append the events not yet recorded."""
        fresh = [e for e in events if self._committed.pop(id(e), None) is not e]
        await self._ledger.record_events(fresh)


class InMemoryLedger:
    """A CapacityLedger and TokenStore held in dicts, on ``clock``'s time."""

    def __init__(
        self,
        clock: Clock,
        *,
        overcommit: Overcommit | None = None,
        demand: DemandPolicy | None = None,
        enforcement: ClaimEnforcement = ClaimEnforcement.ADVISORY,
    ) -> None:
        self.clock = clock
        self.overcommit = overcommit or Overcommit()
        self.demand = demand or DemandPolicy()
        self.enforcement = enforcement
        self._tables = _Tables(ClusterState(_NOTHING, _NOTHING, _NOTHING, clock.now()))
        self._sink = InMemoryEventSink(self)
        self.open = False

    # the one write path -----------------------------------------------------------------------

    def _write(self, work: Callable[[], R], audit: AuditOf[R] | None = None) -> R:
        """Run ``work`` and append ``audit``'s events for its result, or change nothing."""
        saved = self._tables.copy()
        try:
            result = work()
            written = () if audit is None else tuple(audit(result))
            self._append(written)
        except BaseException:
            self._tables = saved
            raise
        self._sink.committed(written)
        return result

    def _append(self, events: Sequence[Event]) -> None:
        trail = self._tables.events
        for event in events:
            trail.append(RecordedEvent(len(trail) + 1, _stored(event)))

    # lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Nothing to connect to."""
        self.open = True

    async def close(self) -> None:
        """Idempotent, like the SQL ledger's."""
        self.open = False

    async def migrate(self, revision: str = "head") -> str:
        """No schema: the revision asked for is the one there."""
        return revision

    def event_sink(self) -> EventSink:
        """An EventSink writing to this ledger's audit trail."""
        return self._sink

    # nodes -----------------------------------------------------------------------------------

    def _now(self) -> datetime:
        return self.clock.now()

    def _node(self, name: str) -> NodeState:
        found = self._tables.nodes.get(name)
        if found is None:
            raise NodeNotFound(name)
        return found

    def _set_node(self, node: NodeState) -> NodeState:
        self._tables.nodes[node.name] = node
        return node

    def _recompute_totals(self) -> None:
        total = _sum([n.limits for n in self._tables.nodes.values()])
        self._tables.cluster = replace(self._tables.cluster, total=total, updated_at=self._now())

    def _specified(self, node: NodeState, spec: NodeSpec) -> NodeState:
        limits = node_limits(spec.capacity, self.overcommit)
        return replace(
            node,
            pool=spec.pool,
            labels=dict(spec.labels),
            capacity=spec.capacity,
            limits=limits,
            updated_at=self._now(),
        )

    async def add_node(
        self, spec: NodeSpec, *, audit: AuditOf[NodeState] | None = None
    ) -> NodeState:
        """Add a schedulable node with nothing used; the cluster's totals follow."""

        def work() -> NodeState:
            if spec.name in self._tables.nodes:
                raise NodeExists(spec.name)
            node = self._set_node(
                NodeState(
                    name=spec.name,
                    pool=spec.pool,
                    labels=dict(spec.labels),
                    capacity=spec.capacity,
                    limits=node_limits(spec.capacity, self.overcommit),
                    used=_NOTHING,
                    expected_demand=0.0,
                    metrics=NodeMetrics(),
                    schedulable=True,
                    updated_at=self._now(),
                )
            )
            self._recompute_totals()
            return node

        return self._write(work, audit)

    async def update_node(
        self, spec: NodeSpec, *, audit: AuditOf[NodeState] | None = None
    ) -> NodeState:
        """Replace pool, labels and capacity (limits re-derived, counters kept)."""

        def work() -> NodeState:
            node = self._set_node(self._specified(self._node(spec.name), spec))
            self._recompute_totals()
            return node

        return self._write(work, audit)

    async def remove_node(self, name: str, *, audit: AuditOf[None] | None = None) -> None:
        """Remove a node that holds no placement."""
        check_node_name(name)

        def work() -> None:
            self._node(name)
            held = sum(1 for p in self._tables.placements.values() if p.node == name)
            if held:
                raise NodeBusy(name, held)
            del self._tables.nodes[name]
            # The room reserved on it leaves with it (the SQL foreign key's CASCADE).
            for pid in [k for k, r in self._tables.reservations.items() if r.node == name]:
                del self._tables.reservations[pid]
            self._recompute_totals()

        self._write(work, audit)

    async def publish_metrics(self, name: str, metrics: NodeMetrics) -> NodeState:
        """Record the node's load and schedulable threads."""
        check_node_name(name)
        now = self._now()
        return self._write(
            lambda: self._set_node(
                replace(self._node(name), metrics=metrics, metrics_at=now, updated_at=now)
            )
        )

    async def _schedulable(
        self, name: str, schedulable: bool, audit: AuditOf[NodeState] | None
    ) -> NodeState:
        check_node_name(name)
        return self._write(
            lambda: self._set_node(
                replace(self._node(name), schedulable=schedulable, updated_at=self._now())
            ),
            audit,
        )

    async def cordon(self, name: str, *, audit: AuditOf[NodeState] | None = None) -> NodeState:
        """Admit nothing more onto the node."""
        return await self._schedulable(name, False, audit)

    async def uncordon(self, name: str, *, audit: AuditOf[NodeState] | None = None) -> NodeState:
        """Admit onto the node again."""
        return await self._schedulable(name, True, audit)

    # reads -----------------------------------------------------------------------------------

    async def nodes(self, *, after: str | None = None, limit: int | None = None) -> list[NodeState]:
        """Every node by name, or one keyset page."""
        found = [self._tables.nodes[n] for n in sorted(self._tables.nodes)]
        if after is not None:
            found = [n for n in found if n.name > after]
        return found if limit is None else found[:limit]

    async def node(self, name: str) -> NodeState | None:
        """One node, or None."""
        return self._tables.nodes.get(name)

    async def placements(
        self,
        namespace: str | None = None,
        *,
        node: str | None = None,
        after: str | None = None,
        limit: int | None = None,
    ) -> list[Placement]:
        """Placements oldest first, or one keyset page by id."""
        found = [
            p
            for p in self._tables.placements.values()
            if (namespace is None or p.namespace == namespace) and (node is None or p.node == node)
        ]
        if after is None and limit is None:
            return sorted(found, key=lambda p: (p.admitted_at, p.id))
        found = sorted((p for p in found if after is None or p.id > after), key=lambda p: p.id)
        return found if limit is None else found[:limit]

    async def placement(self, placement_id: str) -> Placement | None:
        """One placement, or None."""
        return self._tables.placements.get(placement_id)

    async def placement_by_request(self, namespace: str, request_id: str) -> Placement | None:
        """The placement admitted for ``(namespace, request_id)``, or None."""
        return self._by_request(namespace, request_id)

    def _by_request(self, namespace: str, request_id: str) -> Placement | None:
        # The SQL ledger's UNIQUE(namespace, request_id): the admission itself finds a repeat,
        # without a read a caller could count.
        return next(
            (
                p
                for p in self._tables.placements.values()
                if p.namespace == namespace and p.request_id == request_id
            ),
            None,
        )

    async def cluster(self) -> ClusterState:
        """The cluster row."""
        return self._tables.cluster

    async def events(
        self,
        *,
        namespace: str | None = None,
        subject: str | None = None,
        kind: str | None = None,
        after_id: int = 0,
        limit: int = 100,
        newest_first: bool = False,
        before_id: int | None = None,
    ) -> list[RecordedEvent]:
        """Audit events after ``after_id`` (before ``before_id``), filtered, bounded."""
        if not 1 <= limit <= MAX_EVENTS:
            raise ValueError(f"limit: must be between 1 and {MAX_EVENTS}, got {limit}")
        found = [
            r
            for r in self._tables.events
            if r.id > after_id
            and (before_id is None or r.id < before_id)
            and (namespace is None or r.event.namespace == namespace)
            and (subject is None or r.event.subject == subject)
            and (kind is None or r.event.kind == kind)
        ]
        if newest_first:
            found.reverse()
        return found[:limit]

    async def record_events(self, events: Sequence[Event]) -> None:
        """Append events to the audit trail."""
        self._append(events)

    # admissions: the domain's sequence (capacity.admission) over this store's steps --------

    @staticmethod
    def _verdict(
        guard: Guard | None, row: dict[str, object], params: Mapping[str, Any], enforce: bool
    ) -> Charged[None]:
        """The guard's verdict on the row: refused, passed, or bypassed (unenforced)."""
        denial = None if guard is None else deny(guard, row, params)
        if denial is not None and enforce:
            return Charged(denial=denial)
        return Charged(bypassed=denial)

    def _node_charge(
        self, name: str, amount: Resources, request: AdmitRequest | MoveRequest
    ) -> Charged[NodeState]:
        node = self._node(name)
        params = {**amount.as_dict(), "demand": request.demand, "target_load": request.target_load}
        verdict = self._verdict(
            node_guard(request.target_load), node.guard_row(), params, request.enforce
        )
        if verdict.denial is not None:
            return Charged(denial=verdict.denial)
        charged = replace(
            node,
            used=node.used.plus(amount),
            expected_demand=node.expected_demand + request.demand,
            updated_at=self._now(),
        )
        return Charged(bypassed=verdict.bypassed, row=self._set_node(charged))

    def _charge_node(
        self, name: str, amount: Resources, request: AdmitRequest | MoveRequest
    ) -> tuple[NodeState, list[Denial]]:
        """A move's or a reservation's node charge: a refusal raises ``_Refused`` (undoes)."""
        made = self._node_charge(name, amount, request)
        if made.denial is not None:
            raise _Refused(made.denial)
        assert made.row is not None
        return made.row, [made.bypassed] if made.bypassed else []

    async def admit(self, request: AdmitRequest, *, audit: Audit | None = None) -> Admission:
        """The domain's admission over this store's dicts; a refusal or a repeat undoes it."""
        steps = _Steps(self)
        saved = self._tables.copy()
        placement_id = request.placement_id or str(uuid.uuid4())
        try:
            made = await admission.admit(steps, request, placement_id, self.enforcement, audit)
        except (_Taken, NodeNotFound) as exc:
            self._tables = saved
            # As the SQL ledger: a repeat of an earlier request answers with its placement.
            replay = await admission.replay_of(self.placement_by_request, request)
            if replay is not None:
                return replay
            if isinstance(exc, _Taken):  # pragma: no cover - its key was just seen
                raise AssertionError("a taken request id without its placement") from exc
            raise
        except BaseException:
            self._tables = saved
            raise
        if made.denial is not None:
            self._tables = saved
            replay = await admission.replay_of(self.placement_by_request, request)
            return made if replay is None else replay
        self._sink.committed(steps.written)
        return made

    def _locate(self, placement_id: str, namespace: str | None) -> Placement | None:
        found = self._tables.placements.get(placement_id)
        if found is None or (namespace is not None and found.namespace != namespace):
            return None
        return found

    def _credit_cluster(self, amount: Resources) -> bool:
        row = self._tables.cluster
        before = row.unclaimed_used
        self._tables.cluster = replace(
            row, unclaimed_used=before.minus_floored(amount), updated_at=self._now()
        )
        return _clamps(before, amount)

    def _credit_namespace(self, p: Placement) -> bool:
        """Credit the claim the placement was charged to while it is active, else the cluster."""
        claim = None if p.claim_id is None else self._tables.claims.get(p.claim_id)
        if claim is None or claim.state is not ClaimState.ACTIVE:
            return self._credit_cluster(p.resources)
        used = claim.used.minus_floored(p.resources)
        self._tables.claims[claim.id] = replace(claim, used=used, updated_at=self._now())
        shrink = overage_decrease(claim.limit, claim.used, p.resources)
        clamped = _clamps(claim.used, p.resources)
        if not shrink.is_zero():
            clamped |= self._credit_cluster(shrink)
        return clamped

    def _credit_node(self, p: Placement) -> tuple[bool, float]:
        node = self._node(p.node)
        now = self._now()
        credit = remaining(p.demand, age_seconds(p.admitted_at, now), self.demand.decay_seconds)
        self._set_node(
            replace(
                node,
                used=node.used.minus_floored(p.resources),
                expected_demand=max(0.0, node.expected_demand - credit),
                updated_at=now,
            )
        )
        return _clamps(node.used, p.resources), min(credit, node.expected_demand)

    async def release(
        self,
        placement_id: str,
        *,
        namespace: str | None = None,
        audit: AuditOf[Release] | None = None,
    ) -> Release:
        """Delete the placement and credit its charges (floored); idempotent."""

        def work() -> Release:
            p = self._locate(placement_id, namespace)
            if p is None:
                return Release(released=False)
            clamped = self._credit_namespace(p)
            node_clamped, credit = self._credit_node(p)
            del self._tables.placements[p.id]
            return Release(True, p, clamped or node_clamped, credit)

        return self._write(work, audit)

    async def move(self, request: MoveRequest, *, audit: Audit | None = None) -> Admission:
        """Move a placement to another node under that node's guard."""

        def work() -> Admission:
            p = self._locate(request.placement_id, request.namespace)
            if p is None:
                raise PlacementNotFound(request.placement_id)
            if p.node == request.node:
                return Admission(placement=p, node=self._node(p.node), claim_id=p.claim_id)
            self._credit_node(p)
            held = self._tables.reservations.pop(p.id, None)
            if held is not None and held.node in self._tables.nodes and held.node != request.node:
                self._credit_room(held.node, held.resources)  # reserved elsewhere: handed back
            if held is not None and held.node == request.node:
                # Into its reservation: the room is charged already; only the demand is new.
                node = self._node(request.node)
                target = self._set_node(
                    replace(
                        node,
                        expected_demand=node.expected_demand + request.demand,
                        updated_at=self._now(),
                    )
                )
                bypassed: list[Denial] = []
            else:
                target, bypassed = self._charge_node(request.node, p.resources, request)
            moved = replace(p, node=request.node, demand=request.demand, admitted_at=self._now())
            self._tables.placements[p.id] = moved
            return Admission(
                placement=moved, node=target, claim_id=p.claim_id, bypassed=tuple(bypassed)
            )

        try:
            return self._write(work, audit)
        except _Refused as refused:
            assert isinstance(refused.refusal, Denial)
            return Admission(denial=refused.refusal)

    # room reservations -------------------------------------------------------------------------

    def _credit_room(self, name: str, amount: Resources) -> None:
        node = self._node(name)
        used = node.used.minus_floored(amount)
        self._set_node(replace(node, used=used, updated_at=self._now()))

    def _end(self, pids: Sequence[str]) -> int:
        for pid in pids:
            held = self._tables.reservations.pop(pid)
            self._credit_room(held.node, held.resources)
        return len(pids)

    async def reserve(
        self,
        owner: str,
        requests: Sequence[ReservationRequest],
        *,
        audit: AuditOf[Reserved] | None = None,
    ) -> Reserved:
        """Replace ``owner``'s reservations, all or none, each under its node's guard."""
        wanted = {r.reservation.placement for r in requests}

        def work() -> Reserved:
            self._end(
                [
                    pid
                    for pid, r in self._tables.reservations.items()
                    if r.owner == owner or pid in wanted
                ]
            )
            for request in requests:
                held = request.reservation
                move = MoveRequest(held.placement, held.node, 0.0, request.target_load, True)
                try:
                    self._charge_node(held.node, held.resources, move)
                except (_Refused, NodeNotFound) as refused:  # full, or gone since the plan
                    raise _ReserveRefused(held) from refused
                self._tables.reservations[held.placement] = replace(held, owner=owner)
            return Reserved(made=True)

        try:
            return self._write(work, audit)
        except _ReserveRefused as refused:
            return Reserved(made=False, refused=refused.reservation)

    async def reservations(self, owner: str | None = None) -> list[Reservation]:
        """The stored reservations (of ``owner``, or all), by placement id."""
        held = sorted(self._tables.reservations.values(), key=lambda r: r.placement)
        return [r for r in held if owner is None or r.owner == owner]

    async def end_reservations(self, owner: str) -> int:
        """End ``owner``'s reservations, crediting their nodes."""
        return self._write(
            lambda: self._end(
                [pid for pid, r in self._tables.reservations.items() if r.owner == owner]
            )
        )

    def _expire_reservations(self) -> None:
        """End what no longer holds room: expired, or its placement no longer on its owner."""
        now, placed = self._now(), self._tables.placements
        self._end(
            [
                pid
                for pid, r in self._tables.reservations.items()
                if not live(r, now) or pid not in placed or placed[pid].node != r.owner
            ]
        )

    # claims ----------------------------------------------------------------------------------

    def _give_back(self, claim: Claim) -> bool:
        """Return an active claim's limits and usage to the unclaimed side; True if clamped."""
        row = self._tables.cluster
        change = plan_release(claim, row)
        self._tables.cluster = ClusterState(
            row.total, change.claimed, change.unclaimed_used, self._now()
        )
        return change.clamped

    def _retire(self, claim: Claim) -> Claim:
        retired = replace(claim, state=ClaimState.EXPIRED, updated_at=self._now())
        self._tables.claims[claim.id] = retired
        return retired

    def _create(self, request: ClaimRequest) -> ClaimOutcome:
        now, ns = self._now(), request.namespace
        stored = next(
            (
                c
                for c in self._tables.claims.values()
                if c.namespace == ns and c.state is ClaimState.ACTIVE
            ),
            None,
        )
        clamped = False
        if stored is not None:
            if stored.is_active(now):
                message = f"namespace {ns} already has an active claim ({stored.id})"
                raise _Refused(ClaimRefusal(RefusalReason.EXISTS, message))
            self._retire(stored)
            clamped = self._give_back(stored)
        mine = [p for p in self._tables.placements.values() if p.namespace == ns]
        row = self._tables.cluster
        plan = plan_create(request, row, _sum([p.resources for p in mine]), now)
        if isinstance(plan, ClaimRefusal):
            raise _Refused(plan)
        change = plan.cluster
        self._tables.cluster = ClusterState(row.total, change.claimed, change.unclaimed_used, now)
        claim_id, active = str(uuid.uuid4()), ClaimState.ACTIVE
        claim = Claim(claim_id, ns, plan.limit, plan.used, active, plan.expires_at, now, now)
        self._tables.claims[claim.id] = claim
        for p in mine:
            self._tables.placements[p.id] = replace(p, claim_id=claim.id)
        return ClaimOutcome(
            claim=claim,
            clamped=clamped or change.clamped,
            expired=None if stored is None else stored.effective(now),
        )

    async def create_claim(
        self, request: ClaimRequest, *, audit: AuditOf[ClaimOutcome] | None = None
    ) -> ClaimOutcome:
        """Reserve the limit for the namespace, migrating its usage into the claim; or refuse."""
        try:
            return self._write(lambda: self._create(request), audit)
        except _Refused as refused:
            assert isinstance(refused.refusal, ClaimRefusal)
            return ClaimOutcome(refusal=refused.refusal)

    def _find_claim(self, claim_id: str, namespace: str | None) -> Claim | None:
        found = self._tables.claims.get(claim_id)
        if found is None or (namespace is not None and found.namespace != namespace):
            return None
        return found

    async def claim(self, claim_id: str, *, namespace: str | None = None) -> Claim | None:
        """One claim with its effective coverage, or None."""
        found = self._find_claim(claim_id, namespace)
        return None if found is None else found.effective(self._now())

    async def claims(self, namespace: str | None = None) -> list[Claim]:
        """Claims, expired ones included, oldest first."""
        now = self._now()
        found = [
            c.effective(now)
            for c in self._tables.claims.values()
            if namespace is None or c.namespace == namespace
        ]
        return sorted(found, key=lambda c: (c.created_at, c.id))

    def _update(self, claim_id: str, change: ClaimUpdate, namespace: str | None) -> ClaimOutcome:
        now = self._now()
        claim = self._find_claim(claim_id, namespace)
        if claim is None:
            message = f"namespace claim {claim_id} not found"
            return ClaimOutcome(refusal=ClaimRefusal(RefusalReason.NOT_FOUND, message))
        expired = None
        if claim.is_due(now):
            self._give_back(claim)
            claim = expired = self._retire(claim)
        moves = change.limit_after(claim.limit) != claim.limit
        row = self._tables.cluster if moves and claim.is_active(now) else None
        plan = plan_update(claim, change, row, now)
        if isinstance(plan, ClaimRefusal):
            if plan.reason is RefusalReason.NOT_ACTIVE:
                return ClaimOutcome(refusal=plan, expired=expired)  # the expiry commits
            raise _Refused(plan)
        if plan.cluster is not None:
            c, moved = self._tables.cluster, plan.cluster
            self._tables.cluster = ClusterState(c.total, moved.claimed, moved.unclaimed_used, now)
        updated = replace(claim, limit=plan.limit, expires_at=plan.expires_at, updated_at=now)
        self._tables.claims[claim.id] = updated
        clamped = plan.cluster is not None and plan.cluster.clamped
        return ClaimOutcome(claim=updated, clamped=clamped)

    async def update_claim(
        self,
        claim_id: str,
        update: ClaimUpdate,
        *,
        namespace: str | None = None,
        audit: AuditOf[ClaimOutcome] | None = None,
    ) -> ClaimOutcome:
        """Apply a field-masked update, or refuse."""
        try:
            return self._write(lambda: self._update(claim_id, update, namespace), audit)
        except _Refused as refused:
            assert isinstance(refused.refusal, ClaimRefusal)
            return ClaimOutcome(refusal=refused.refusal)

    async def delete_claim(
        self,
        claim_id: str,
        *,
        namespace: str | None = None,
        audit: AuditOf[ClaimDeletion] | None = None,
    ) -> ClaimDeletion:
        """Delete a claim, its usage back to the unclaimed side; idempotent."""

        def work() -> ClaimDeletion:
            claim = self._find_claim(claim_id, namespace)
            if claim is None:
                return ClaimDeletion(deleted=False)
            clamped, returned = False, _NOTHING
            if claim.state is ClaimState.ACTIVE:
                clamped, returned = self._give_back(claim), claim.used
            del self._tables.claims[claim.id]
            return ClaimDeletion(True, claim.effective(self._now()), returned, clamped)

        return self._write(work, audit)

    # the reconcile pass ----------------------------------------------------------------------

    def _snapshot(self) -> Snapshot:
        placements = list(self._tables.placements.values())
        by_node: dict[str, list[Resources]] = {}
        by_namespace: dict[str, list[Resources]] = {}
        for p in placements:
            by_node.setdefault(p.node, []).append(p.resources)
            by_namespace.setdefault(p.namespace, []).append(p.resources)
        reserved = per_node(self._tables.reservations.values())
        return Snapshot(
            node_reserved=reserved,
            nodes=[
                NodeCounters(n.name, n.limits, n.used, n.expected_demand)
                for n in self._tables.nodes.values()
            ],
            node_usage={k: _sum(v) for k, v in by_node.items()},
            namespace_usage={k: _sum(v) for k, v in by_namespace.items()},
            charges=[DemandCharge(p.node, p.demand, p.admitted_at) for p in placements],
            claims=[c for c in self._tables.claims.values() if c.state is ClaimState.ACTIVE],
            cluster=self._tables.cluster,
        )

    def _apply(self, result: Reconciliation) -> int:
        """Write the pass's results; return how many placements were pointed at their claim."""
        now, tables = self._now(), self._tables
        for claim in result.expired:
            self._retire(claim)
        for counted in result.claims:
            if not counted.drift.is_zero():
                stored = tables.claims[counted.id]
                tables.claims[counted.id] = replace(stored, used=counted.used, updated_at=now)
        for n in result.nodes:
            if n.changed:
                node = tables.nodes[n.name]
                tables.nodes[n.name] = replace(
                    node, used=n.used, expected_demand=n.expected_demand, updated_at=now
                )
        row = result.cluster
        tables.cluster = ClusterState(row.total, row.claimed, row.unclaimed_used, now)
        wrong = [
            p
            for p in tables.placements.values()
            if p.namespace in result.claim_of and p.claim_id != result.claim_of[p.namespace]
        ]
        for p in wrong:
            tables.placements[p.id] = replace(p, claim_id=result.claim_of[p.namespace])
        return len(wrong)

    async def reconcile(self, *, audit: AuditOf[PassReport] | None = None) -> PassReport:
        """One pass: expire due claims, recompute every counter, report the drift."""
        started = time.perf_counter()

        def work() -> PassReport:
            self._expire_reservations()
            result = reconcile(self._snapshot(), self._now(), self.demand.decay_seconds)
            return PassReport(result, time.perf_counter() - started, self._apply(result))

        return self._write(work, audit)

    # API tokens (the TokenStore port) ----------------------------------------------------------

    async def create_token(
        self,
        namespace: str,
        token_digest: str,
        at: datetime,
        *,
        audit: AuditOf[ApiToken] | None = None,
    ) -> ApiToken:
        """Store an active token's digest."""
        check_namespace(namespace)
        if not isinstance(token_digest, str) or len(token_digest) != DIGEST_LENGTH:
            raise ValueError(f"token_digest: must be {DIGEST_LENGTH} hex characters")
        token = ApiToken(str(uuid.uuid4()), namespace, at)

        def work() -> ApiToken:
            self._tables.tokens[token.id] = (token, token_digest)
            return token

        return self._write(work, audit)

    async def token_by_digest(self, token_digest: str) -> ApiToken | None:
        """The token with this digest, active or revoked."""
        return next((t for t, d in self._tables.tokens.values() if d == token_digest), None)

    async def list_tokens(self, namespace: str) -> list[ApiToken]:
        """A namespace's tokens, oldest first."""
        found = [t for t, _ in self._tables.tokens.values() if t.namespace == namespace]
        return sorted(found, key=lambda t: (t.created_at, t.id))

    async def revoke_token(
        self, namespace: str, token_id: str, at: datetime, *, audit: AuditOf[bool] | None = None
    ) -> bool:
        """Revoke an active token of ``namespace``; False if there is none with that id."""

        def work() -> bool:
            found = self._tables.tokens.get(token_id)
            if found is None or found[0].namespace != namespace or not found[0].active:
                return False
            self._tables.tokens[token_id] = (replace(found[0], revoked_at=at), found[1])
            return True

        return self._write(work, audit)
