"""The ``place`` use case: rank the candidates, walk them, waive demand once, report.

It depends only on the CapacityLedger port, the domain, a Clock and an EventSink, so the same
code runs against any ledger plugin. Every decision is the domain's: which nodes are
candidates (``ranking.eligible``, over a ``NodeSnapshot`` of the ledger's nodes), their order
(``ranking.Candidates``, drawn lazily one candidate per try), when the waiver pass runs and
over which candidates (``walk.Walk``), the demand charge (``demand.charge``). The service only
drives the ledger through those decisions and reports them as audit events (capacity spec 4.5,
names exact), delivered in one batch when the walk is over.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from random import Random
from typing import Any

from fleetgate.apps.services.audit import AuditEvents, Trail
from fleetgate.apps.services.snapshot import NodeSnapshot
from fleetgate.apps.services.walking import try_candidates
from fleetgate.domain.capacity.demand import DemandPolicy, charge
from fleetgate.domain.capacity.denials import Denial, DimensionDetail
from fleetgate.domain.capacity.errors import LedgerUnavailable, NodeNotFound, PlacementNotFound
from fleetgate.domain.capacity.model import (
    Admission,
    AdmitRequest,
    MoveRequest,
    NodeState,
    Placement,
    PlacementRequest,
    Release,
    replay_mismatch,
)
from fleetgate.domain.capacity.presumption import presumed_refusal
from fleetgate.domain.capacity.ranking import CandidateOrder, Candidates
from fleetgate.domain.capacity.walk import Attempt, Presume, Walk
from fleetgate.domain.events import Event, Level
from fleetgate.domain.ports import CapacityLedger, Clock, EventSink

PLACED = "instance placed"
REFUSED = "schedule candidate refused by capacity guard"
WAIVING = "no candidate admitted and some refused on demand alone, waiving demand guard"
FAILED = "schedule failed, every candidate refused by capacity guard"
FINAL_CANDIDATES = "schedule final candidates"
UNGUARDED = "instance placed without capacity guard"
OVER_GUARD = "placement recorded despite exceeding capacity guard"
OVER_CLAIM = "placement admitted over namespace capacity claim"
WRITE_FAILED = "instance placement write failed"
RELEASED = "instance placement released"
RELEASE_FAILED = "instance placement release failed"
CLAMPED = "capacity counter clamped at zero"
MOVED = "instance start redirected to another node"


@dataclass(frozen=True)
class PlaceOutcome:
    """The result of ``place``: the placement, or every candidate's refusal.

    ``subject`` is the id the walk's audit events were recorded under (the placement's id when
    one was admitted), so an operator can read why a refused request was refused.
    ``candidates`` are the candidates the walk drew, in order: every eligible node when nothing
    admitted, otherwise those tried up to and including the one that admitted.
    """

    subject: str
    placement: Placement | None = None
    denials: dict[str, Denial] = field(default_factory=dict)
    candidates: tuple[str, ...] = ()
    waived: bool = False
    replayed: bool = False
    claim_over_limit: tuple[DimensionDetail, ...] = ()

    @property
    def placed(self) -> bool:
        """True when a placement exists for the request."""
        return self.placement is not None


def _dims(dimensions: Sequence[DimensionDetail]) -> list[dict[str, Any]]:
    return [d.as_dict() for d in dimensions]


class RequestIdReused(ValueError):
    """A ``request_id`` already placed a different request: replaying it would answer wrongly."""

    def __init__(self, placement: Placement, fields: tuple[str, ...]) -> None:
        super().__init__(
            f"request_id {placement.request_id!r} was already used for a different placement "
            f"({placement.id}); these fields differ: {', '.join(fields)}"
        )
        self.placement = placement
        self.fields = fields


def same_request(placement: Placement, request: PlacementRequest) -> Placement:
    """``placement`` when ``request`` is the one that made it, else RequestIdReused."""
    fields = replay_mismatch(placement, request)
    if fields:
        raise RequestIdReused(placement, fields)
    return placement


class PlacementService:
    """Places, releases and moves placements through a CapacityLedger."""

    def __init__(
        self,
        ledger: CapacityLedger,
        clock: Clock,
        events: EventSink,
        policy: DemandPolicy | None = None,
        rng: Random | None = None,
        snapshot: NodeSnapshot | None = None,
    ) -> None:
        self._ledger = ledger
        self._clock = clock
        self._events = events
        self._event = AuditEvents(clock)
        self.policy = policy or DemandPolicy()
        self._rng = rng or Random()
        # Without one, the nodes are read for every request (a snapshot of age 0).
        self.snapshot = snapshot or NodeSnapshot(ledger, clock, self.policy.target_load)

    async def _candidates(self, request: PlacementRequest) -> Candidates:
        if request.node is not None:
            # A forced node is a one-candidate walk: tried even if cordoned, so the refusal
            # says why instead of "no candidates". It is read now, never from the snapshot.
            node = await self._ledger.node(request.node)
            if node is None:
                raise NodeNotFound(request.node)
            return Candidates([node], self.policy.target_load)
        return await self.snapshot.candidates(request.pool)

    async def candidates(self, request: PlacementRequest) -> Candidates:
        """The candidates ``place`` would walk for ``request`` (the dry run walks them too)."""
        return await self._candidates(request)

    async def place(self, request: PlacementRequest) -> PlaceOutcome:
        """Admit ``request`` on the best candidate that has room, or report every refusal."""
        ns = request.namespace
        # No read for an earlier placement with this request id first: the admission
        # transaction finds it itself (the placements' UNIQUE(namespace, request_id) refuses
        # its INSERT and the ledger answers with the earlier placement), so a request id costs
        # a first request nothing. Only a walk that never reached the ledger reads it here.
        subject = str(uuid.uuid4())
        mark = self.snapshot.mark()
        try:
            candidates = await self._candidates(request)
        except NodeNotFound:
            earlier = await self._replay(request)
            if earlier is None:
                raise
            return earlier
        order = candidates.order(self._rng)
        demand = charge(request.resources.cpus, self.policy.demand_per_vcpu)
        read: dict[str, NodeState] = {}

        def drawn() -> Iterator[str]:
            for r in order:
                read[r.node.name] = r.node
                yield r.node.name

        def presume(name: str) -> Denial | None:
            return presumed_refusal(read[name], request.resources, demand, target_load)

        async def recheck() -> Presume | None:
            if self.snapshot.max_age <= 0:
                return None  # the candidates were read for this request: fresh enough
            fresh = await self.snapshot.read_since(mark)

            def again(name: str) -> Denial | None:
                node = fresh.get(name)  # gone since: tried, the ledger says so
                return None if node is None else presumed_refusal(node, *needs)

            return again

        target_load = self.policy.target_load
        needs = (request.resources, demand, target_load)
        # A forced node or an unguarded write is always tried: only the guard may refuse it.
        walk = Walk(drawn(), presume if request.node is None and request.enforce else None)
        events: list[Event] = []
        reported: set[str] = set()

        def report_presumed() -> None:
            for name, denial in walk.presumed.items():
                if name not in reported:
                    reported.add(name)
                    events.append(self._presumed_event(subject, ns, name, denial))

        async def emit() -> None:
            # Reported first, as the spec orders the events, but written once the walk is
            # over: only then is it known which candidates were drawn.
            events.insert(0, self._final_candidates(subject, ns, candidates, order))
            await self._events.emit(events)

        attempts = 0

        audit: Trail[Admission] | None = None

        async def attempt(step: Attempt) -> Admission | None:
            nonlocal attempts, audit
            report_presumed()
            if step.opens_waiver:
                events.append(self._event.walked(WAIVING, subject, ns, walk))
            attempts += 1
            audit = self._audit(subject, ns, candidates, order, events, request, attempts, step)
            try:
                admission = await self._ledger.admit(
                    AdmitRequest(
                        namespace=ns,
                        node=step.node,
                        resources=request.resources,
                        demand=demand,
                        target_load=step.target_load(self.policy.target_load),
                        enforce=request.enforce,
                        request_id=request.request_id,
                        placement_id=subject,
                    ),
                    audit=audit.events_of,
                )
            except NodeNotFound:
                if request.node is not None:
                    raise
                # The node left the ledger after the snapshot was read: for this walk it
                # is a refusal (no room there), never an error; the next candidate is tried.
                events.append(self._gone_event(subject, ns, step.node, step))
                return None
            if admission.denial is not None:
                events.append(self._event.refused(REFUSED, subject, ns, step, admission.denial))
            return admission

        try:
            admission = await try_candidates(walk, attempt, recheck)
        except LedgerUnavailable as exc:
            events.append(self._event(WRITE_FAILED, subject, ns, Level.ERROR, error=str(exc)))
            await emit()
            raise
        if admission is not None and admission.replayed and admission.placement is not None:
            # The request id already placed: a replay records no change, so the walk so far
            # (refusals of nodes that left the ledger, at most) is not reported.
            replayed = same_request(admission.placement, request)
            return PlaceOutcome(replayed.id, replayed, replayed=True)
        tried = tuple(walk.candidates)
        if walk.admitted_on is None:
            if admission is None and (replay := await self._replay(request)) is not None:
                return replay  # no candidate reached the ledger to find the earlier placement
            report_presumed()
            events.append(self._event.walked(FAILED, subject, ns, walk))
            await emit()
            return PlaceOutcome(subject, None, dict(walk.denials), tried, walk.waived)
        assert admission is not None and audit is not None  # the walk ended on an admission
        # The ledger wrote these in the admission's transaction; emitted only to the other
        # sinks now (the ledger's own sink knows them and skips them).
        await self._events.emit(audit.delivered(admission))
        return PlaceOutcome(
            subject,
            admission.placement,
            dict(walk.denials),
            tried,
            walk.waived,
            claim_over_limit=admission.claim_over_limit,
        )

    async def _replay(self, request: PlacementRequest) -> PlaceOutcome | None:
        """The earlier placement of ``request``'s id as a replay (RequestIdReused if it differs)."""
        if request.request_id is None:
            return None
        found = await self._ledger.placement_by_request(request.namespace, request.request_id)
        if found is None:
            return None
        return PlaceOutcome(found.id, same_request(found, request), replayed=True)

    def _audit(
        self,
        subject: str,
        ns: str,
        candidates: Candidates,
        order: CandidateOrder,
        events: list[Event],
        request: PlacementRequest,
        attempts: int,
        attempt: Attempt,
    ) -> Trail[Admission]:
        """The events an admission on this attempt commits with it (spec 4.5's order)."""
        return Trail(
            lambda admission: [
                self._final_candidates(subject, ns, candidates, order),
                *events,
                *self._admitted_events(admission, request, attempts, attempt.enforce_demand),
            ]
        )

    def _final_candidates(
        self, subject: str, ns: str, candidates: Candidates, order: CandidateOrder
    ) -> Event:
        # The candidates the walk drew, in order, not the whole fleet: listing 10,000 nodes with
        # their weights on every placement cost more than the placement (docs/decisions.md).
        drawn = order.drawn
        return self._event(
            FINAL_CANDIDATES,
            subject,
            ns,
            candidates=[r.node.name for r in drawn],
            weights={r.node.name: round(r.weight, 4) for r in drawn},
            buckets={r.node.name: r.bucket for r in drawn},
            candidate_count=len(candidates),
            lowest_bucket=candidates.bands[0].bucket if candidates.bands else None,
        )

    def _presumed_event(self, subject: str, ns: str, node: str, denial: Denial) -> Event:
        # A refusal a read of the node showed, so it was never tried: said apart from the
        # guard's own refusals, with the same details.
        return self._event(
            REFUSED, subject, ns, node=node, enforce_demand=True, presumed=True, **denial.as_dict()
        )

    def _gone_event(self, subject: str, ns: str, node: str, attempt: Attempt) -> Event:
        return self._event(
            REFUSED,
            subject,
            ns,
            node=node,
            enforce_demand=attempt.enforce_demand,
            failing_stage="node",
            dimensions=[],
            demand_only=False,
            cordoned=False,
            reason="node left the ledger",
        )

    def _admitted_events(
        self, admission: Admission, request: PlacementRequest, attempts: int, enforce_demand: bool
    ) -> list[Event]:
        placement = admission.placement
        assert placement is not None
        node = admission.node
        ns = placement.namespace
        out = [
            self._event(
                PLACED,
                placement.id,
                ns,
                node=placement.node,
                previous_node=None,
                placement_attempts=attempts,
                enforce=request.enforce,
                enforce_demand=enforce_demand,
                cpus=placement.resources.cpus,
                memory_mb=placement.resources.memory_mb,
                disk_gb=placement.resources.disk_gb,
                claim_id=placement.claim_id,
                **(
                    {}
                    if node is None
                    else {
                        "node_used_cpus": node.used.cpus,
                        "node_used_memory_mb": node.used.memory_mb,
                        "node_used_disk_gb": node.used.disk_gb,
                        "node_expected_demand": node.expected_demand,
                    }
                ),
            )
        ]
        if not request.enforce:
            out.append(self._event(UNGUARDED, placement.id, ns, Level.ERROR, node=placement.node))
        for bypassed in admission.bypassed:
            out.append(
                self._event(
                    OVER_GUARD,
                    placement.id,
                    ns,
                    Level.ERROR,
                    node=placement.node,
                    **bypassed.as_dict(),
                )
            )
        if admission.claim_over_limit:
            out.append(
                self._event(
                    OVER_CLAIM,
                    placement.id,
                    ns,
                    Level.WARNING,
                    node=placement.node,
                    namespace=ns,
                    claim=admission.claim_id,
                    claim_dimensions=_dims(admission.claim_over_limit),
                )
            )
        return out

    async def release(self, namespace: str, placement_id: str) -> Release:
        """Release a placement of ``namespace`` (idempotent: ``released`` false when gone)."""
        trail = Trail[Release](
            lambda result: self._released_events(namespace, placement_id, result)
        )
        try:
            result = await self._ledger.release(
                placement_id, namespace=namespace, audit=trail.events_of
            )
        except LedgerUnavailable as exc:
            # Records no change (the release did not happen, or it is unknown whether it did,
            # and then its own events are in the table exactly if it committed): best-effort.
            await self._events.emit(
                [self._event(RELEASE_FAILED, placement_id, namespace, Level.ERROR, error=str(exc))]
            )
            raise
        events = trail.delivered(result)
        if events:
            # Written with the release; emitted now only to the other sinks.
            await self._events.emit(events)
        return result

    def _released_events(self, namespace: str, placement_id: str, result: Release) -> list[Event]:
        """What a release commits with it: none when there was nothing to release."""
        if not result.released or result.placement is None:
            return []
        node = result.placement.node
        events = [
            self._event(
                RELEASED, placement_id, namespace, node=node, demand_credit=result.demand_credit
            )
        ]
        if result.clamped:
            events.append(
                self._event(CLAMPED, placement_id, namespace, Level.ERROR, node=node, released=True)
            )
        return events

    async def move(
        self, namespace: str, placement_id: str, node: str, *, enforce: bool = True
    ) -> Admission:
        """Move a placement of ``namespace`` to ``node``; waive demand once if it alone refused."""
        placement = await self._ledger.placement(placement_id)
        if placement is None or placement.namespace != namespace:
            raise PlacementNotFound(placement_id)
        demand = charge(placement.resources.cpus, self.policy.demand_per_vcpu)
        events: list[Event] = []

        def moved(result: Admission) -> list[Event]:
            # The walk's refusals so far, then the move: committed with the move (spec order).
            if result.placement is None or placement.node == node:
                return list(events)
            at = placement.node
            return [*events, self._event(MOVED, placement_id, namespace, node=at, target_node=node)]

        trail = Trail(moved)

        async def attempt(step: Attempt) -> Admission:
            target_load = step.target_load(self.policy.target_load)
            request = MoveRequest(placement_id, node, demand, target_load, enforce, namespace)
            result = await self._ledger.move(request, audit=trail.events_of)
            if result.denial is not None:
                events.append(
                    self._event.refused(REFUSED, placement_id, namespace, step, result.denial)
                )
            return result

        # A move is a one-candidate walk: the waiver retries the target if demand alone refused.
        result = await try_candidates(Walk([node]), attempt)
        assert result is not None  # the one candidate is always tried
        # A refused move changed nothing: its refusals are delivered best-effort.
        await self._events.emit(events if result.denial is not None else trail.delivered(result))
        return result
