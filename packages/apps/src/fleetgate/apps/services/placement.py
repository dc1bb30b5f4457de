"""The ``place`` use case: load the candidates, let the domain decide, commit each try.

It depends only on the CapacityLedger port, the domain, a Clock and an EventSink, so the same
code runs against any ledger plugin. Every decision is the domain's: which nodes are
candidates (``ranking.eligible``, over a ``NodeSnapshot`` of the ledger's nodes), their order
(``ranking.Candidates``, drawn lazily one candidate per try), which candidates a read already
shows full (``presumption``), when the waiver pass runs and over which candidates
(``walk.Walk``), the demand charge (``demand.charge``), and what the walk reports: its audit
events and the answer's facts (``report.WalkReport``, ``report.PlacementFacts``). The service
only loads, drives the ledger through those decisions, and delivers the report.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from random import Random
from typing import Protocol

from fleetgate.apps.services.audit import AuditEvents, Trail
from fleetgate.apps.services.snapshot import NodeSnapshot
from fleetgate.apps.services.walking import try_candidates
from fleetgate.domain.capacity.admission import seen
from fleetgate.domain.capacity.demand import DemandPolicy, charge
from fleetgate.domain.capacity.denials import Denial, DimensionDetail
from fleetgate.domain.capacity.dimensions import Resources
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
from fleetgate.domain.capacity.report import (
    FAILED,
    FINAL_CANDIDATES,
    OVER_CLAIM,
    OVER_GUARD,
    PLACED,
    REFUSED,
    UNGUARDED,
    WAIVING,
    WRITE_FAILED,
    PlacementFacts,
    WalkReport,
)
from fleetgate.domain.capacity.walk import Attempt, Presume, Walk
from fleetgate.domain.events import Event, Level
from fleetgate.domain.ports import Admissions, AuditTrail, Clock, EventSink

# The walk's events are the domain's report's (``report``); these are the other use cases'.
#: Presumptions remembered at most (then forgotten at once; a fleet's worth is a few thousand).
PRESUMPTIONS_KEPT = 20_000

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


class _Placing:
    """One ``place`` call's walk: the domain's decisions, its report, and each try's commit."""

    def __init__(
        self,
        service: PlacementService,
        request: PlacementRequest,
        candidates: Candidates,
        mark: int,
    ) -> None:
        self._service = service
        self._request = request
        self._mark = mark
        self._demand = charge(request.resources.cpus, service.policy.demand_per_vcpu)
        self._read: dict[str, NodeState] = {}
        order = candidates.order(service._rng)
        # A forced node or an unguarded write is always tried: only the guard may refuse it.
        presumes = request.node is None and request.enforce
        self.walk = Walk(self._drawn(order), self._presume if presumes else None)
        self.report = WalkReport(
            service._event, str(uuid.uuid4()), request, candidates, order, self.walk
        )
        self.audit: Trail[Admission] = Trail(lambda _: [])

    def _drawn(self, order: CandidateOrder) -> Iterator[str]:
        for r in order:
            self._read[r.node.name] = r.node
            yield r.node.name

    def _presume(self, name: str) -> Denial | None:
        return self._presumed(self._read.get(name))

    def _presumed(self, node: NodeState | None) -> Denial | None:
        # A node gone since the read is tried: the ledger says so.
        if node is None:
            return None
        target_load = self._service.policy.target_load
        return self._service.presumed(node, self._request.resources, self._demand, target_load)

    async def recheck(self) -> Presume | None:
        """Presumptions from a read started after the walk began (None: its own read was)."""
        snapshot = self._service.snapshot
        if snapshot.max_age <= 0:
            return None
        fresh = await snapshot.read_since(self._mark)
        return lambda name: self._presumed(fresh.get(name))

    async def attempt(self, step: Attempt) -> Admission | None:
        """Try ``step`` in one guarded ledger transaction; None when its node has left."""
        request, report, service = self._request, self.report, self._service
        report.attempting(step)
        attempts = self.walk.attempts
        self.audit = Trail(lambda made: report.admitted(made, attempts, step.enforce_demand))
        try:
            admission = await service._ledger.admit(
                AdmitRequest(
                    namespace=request.namespace,
                    node=step.node,
                    resources=request.resources,
                    demand=self._demand,
                    target_load=step.target_load(service.policy.target_load),
                    enforce=request.enforce,
                    request_id=request.request_id,
                    placement_id=report.subject,
                ),
                audit=self.audit.events_of,
            )
        except NodeNotFound:
            if request.node is not None:
                raise
            # The node left the ledger after the snapshot was read: for this walk it is a
            # refusal (no room there), never an error; the next candidate is tried.
            report.gone(step)
            return None
        if admission.denial is not None:
            report.refused(step, admission.denial)
        return admission


class PlacementLedger(Admissions, AuditTrail, Protocol):
    """What placing needs: the admissions, and a replay's facts read back from its events."""


class PlacementService:
    """Places, releases and moves placements through a CapacityLedger."""

    def __init__(
        self,
        ledger: PlacementLedger,
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
        self._presumptions: dict[tuple[object, ...], Denial | None] = {}

    def presumed(
        self, node: NodeState, resources: Resources, demand: float, target_load: float
    ) -> Denial | None:
        """``presumption.presumed_refusal``, remembered for the node's figures as read.

        A full fleet refuses every request on every node with the same details until the
        nodes change, and the guard's evaluator that details a refusal costs more than the
        rest of a refusal: each (node state, request) is judged once.
        """
        key = (
            node.name, node.schedulable, node.used, node.limits, node.expected_demand,
            node.metrics, resources, demand, target_load,
        )  # fmt: skip
        if key in self._presumptions:
            return self._presumptions[key]
        if len(self._presumptions) >= PRESUMPTIONS_KEPT:
            self._presumptions.clear()
        denial = self._presumptions[key] = presumed_refusal(node, resources, demand, target_load)
        return denial

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
        """Admit ``request`` on the best candidate that has room, or report every refusal.

        Load the candidates, let the domain's walk decide whom to try (and its report say
        why), and commit each try through the ledger; the admission's events commit with it.
        """
        # No read for an earlier placement with this request id first: the admission
        # transaction finds it itself (the placements' UNIQUE(namespace, request_id) refuses
        # its INSERT and the ledger answers with the earlier placement), so a request id costs
        # a first request nothing. Only a walk that never reached the ledger reads it here.
        mark = self.snapshot.mark()
        try:
            candidates = await self._candidates(request)
        except NodeNotFound:
            earlier = await self._replay(request)
            if earlier is None:
                raise
            return earlier
        placing = _Placing(self, request, candidates, mark)
        try:
            admission = await try_candidates(placing.walk, placing.attempt, placing.recheck)
        except LedgerUnavailable as exc:
            await self._events.emit(placing.report.write_failed(exc))
            raise
        if admission is not None and admission.replayed and admission.placement is not None:
            # The request id already placed: a replay records no change, so the walk so far
            # (refusals of nodes that left the ledger, at most) is not reported.
            return await self._replayed(same_request(admission.placement, request))
        walk, report = placing.walk, placing.report
        tried = tuple(walk.candidates)
        if walk.admitted_on is None:
            if admission is None and (replay := await self._replay(request)) is not None:
                return replay  # no candidate reached the ledger to find the earlier placement
            await self._events.emit(report.failed())
            return PlaceOutcome(report.subject, None, dict(walk.denials), tried, walk.waived)
        assert admission is not None and admission.placement is not None
        # The ledger wrote these in the admission's transaction; emitted only to the other
        # sinks now (the ledger's own sink knows them and skips them).
        await self._events.emit(placing.audit.delivered(admission))
        return PlaceOutcome(
            admission.placement.id,
            admission.placement,
            dict(walk.denials),
            tried,
            walk.waived,
            claim_over_limit=admission.claim_over_limit,
        )

    async def _replay(self, request: PlacementRequest) -> PlaceOutcome | None:
        """The earlier placement of ``request``'s id as a replay (RequestIdReused if it differs)."""
        found = await seen(self._ledger.placement_by_request, request.namespace, request.request_id)
        if found is None:
            return None
        return await self._replayed(same_request(found, request))

    async def _replayed(self, placement: Placement) -> PlaceOutcome:
        # A replay answers as the first answer did: its facts are read back from its events.
        facts = await self.facts(placement)
        return PlaceOutcome(
            placement.id,
            placement,
            waived=facts.demand_waived,
            replayed=True,
            claim_over_limit=facts.over_claim,
        )

    async def facts(self, placement: Placement) -> PlacementFacts:
        """How ``placement``'s admission went, read back from its audit events."""
        return PlacementFacts.from_events(
            r.event for r in await self._ledger.events(subject=placement.id, limit=100)
        )

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


# The walk's event names are the domain report's; said here too, beside this use case's own.
__all__ = [
    "CLAMPED",
    "FAILED",
    "FINAL_CANDIDATES",
    "MOVED",
    "OVER_CLAIM",
    "OVER_GUARD",
    "PLACED",
    "REFUSED",
    "RELEASED",
    "RELEASE_FAILED",
    "UNGUARDED",
    "WAIVING",
    "WRITE_FAILED",
    "PlaceOutcome",
    "PlacementService",
    "RequestIdReused",
    "same_request",
]
