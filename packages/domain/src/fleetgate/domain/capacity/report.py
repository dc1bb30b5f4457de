"""What a placement's walk reports: its audit events (capacity spec 4.5, names exact) and facts.

The walk decides (``walk.Walk``); this says what each of its steps means to an operator, in the
spec's order: the final candidates first, then each refusal (a guard's, a node
that left the ledger), the waiver, and the placement with what it bypassed, or the failure. The
same report gives the facts an answer states (``PlacementFacts``: was demand waived, did it go
over the claim), and reads them back from the events for a replay, so the two cannot disagree.

Events are stamped by the caller's ``Stamp`` (its clock, the API request's id): the content is
decided here, the when and the who by the shell.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from fleetgate.domain.capacity.denials import Denial, DimensionDetail
from fleetgate.domain.capacity.model import Admission, PlacementRequest
from fleetgate.domain.capacity.ranking import CandidateOrder, Candidates
from fleetgate.domain.capacity.walk import Attempt, Walk
from fleetgate.domain.events import Event, Level

PLACED = "instance placed"
REFUSED = "schedule candidate refused by capacity guard"
WAIVING = "no candidate admitted and some refused on demand alone, waiving demand guard"
FAILED = "schedule failed, every candidate refused by capacity guard"
FINAL_CANDIDATES = "schedule final candidates"
UNGUARDED = "instance placed without capacity guard"
OVER_GUARD = "placement recorded despite exceeding capacity guard"
OVER_CLAIM = "placement admitted over namespace capacity claim"
WRITE_FAILED = "instance placement write failed"


class Stamp(Protocol):
    """Makes an event of ``kind`` about ``subject`` now (the service's clock and request id)."""

    def __call__(
        self, kind: str, subject: str, namespace: str | None, level: Level = ..., /, **data: object
    ) -> Event:
        """The stamped event."""
        ...


@dataclass(frozen=True)
class PlacementFacts:
    """How a placement's admission went, as its answer states it."""

    demand_waived: bool = False
    over_claim: tuple[DimensionDetail, ...] = ()

    @classmethod
    def from_events(cls, events: Iterable[Event]) -> PlacementFacts:
        """The facts its admission's events recorded (a replay answers with them)."""
        waived = False
        over: tuple[DimensionDetail, ...] = ()
        for event in events:
            data: dict[str, Any] = event.data
            if event.kind == PLACED:
                waived = data.get("enforce_demand") is False
            elif event.kind == OVER_CLAIM:
                over = tuple(
                    DimensionDetail(
                        dimension=d["dimension"],
                        limit=d["limit"],
                        used=d["used"],
                        requested=d["requested"],
                        exceeded=d["exceeded"],
                    )
                    for d in data.get("claim_dimensions", [])
                )
        return cls(waived, over)


class WalkReport:
    """The events of one placement's walk, gathered as it goes, in the spec's order."""

    def __init__(
        self,
        stamp: Stamp,
        subject: str,
        request: PlacementRequest,
        candidates: Candidates,
        order: CandidateOrder,
        walk: Walk,
    ) -> None:
        self._stamp = stamp
        self.subject = subject
        self._request = request
        self._candidates = candidates
        self._order = order
        self._walk = walk
        #: The walk's events so far, after the final candidates (which come first, once known).
        self.steps: list[Event] = []

    def _event(self, kind: str, level: Level = Level.INFO, /, **data: object) -> Event:
        return self._stamp(kind, self.subject, self._request.namespace, level, **data)

    def attempting(self, step: Attempt) -> None:
        """Before ``step`` is tried: the waiver, if it opens."""
        if step.opens_waiver:
            self.steps.append(self._walked(WAIVING))

    def refused(self, step: Attempt, denial: Denial) -> None:
        """The guard refused ``step``."""
        self.steps.append(
            self._event(
                REFUSED, node=step.node, enforce_demand=step.enforce_demand, **denial.as_dict()
            )
        )

    def gone(self, step: Attempt) -> None:
        """``step``'s node left the ledger after the snapshot was read: a refusal, no error."""
        self.steps.append(
            self._event(
                REFUSED,
                node=step.node,
                enforce_demand=step.enforce_demand,
                failing_stage="node",
                dimensions=[],
                demand_only=False,
                cordoned=False,
                reason="node left the ledger",
            )
        )

    def write_failed(self, error: Exception) -> list[Event]:
        """The walk so far and the write that failed (best-effort: it records no change)."""
        self.steps.append(self._event(WRITE_FAILED, Level.ERROR, error=str(error)))
        return self.walked()

    def failed(self) -> list[Event]:
        """The walk that admitted nowhere: every refusal, then the failure."""
        self.steps.append(self._walked(FAILED))
        return self.walked()

    def walked(self) -> list[Event]:
        """The final candidates, then the walk's events so far."""
        return [self.final_candidates(), *self.steps]

    def admitted(self, admission: Admission, attempts: int, enforce_demand: bool) -> list[Event]:
        """What an admission commits with it: the walk so far, then the placement's events."""
        return [*self.walked(), *self._placed(admission, attempts, enforce_demand)]

    def final_candidates(self) -> Event:
        """The candidates the walk drew, in order, with the figures they were ranked by."""
        # Not the whole fleet: listing 10,000 nodes with their weights on every placement cost
        # more than the placement (docs/decisions.md).
        drawn = self._order.drawn
        candidates = self._candidates
        return self._event(
            FINAL_CANDIDATES,
            candidates=[r.node.name for r in drawn],
            weights={r.node.name: round(r.weight, 4) for r in drawn},
            buckets={r.node.name: r.bucket for r in drawn},
            candidate_count=len(candidates),
            lowest_bucket=candidates.bands[0].bucket if candidates.bands else None,
            **self._presumed(),
        )

    def _presumed(self) -> dict[str, object]:
        # The candidates never tried because a read showed them full: named, not detailed (a
        # failed walk's last event details every refusal, these included). One event per node
        # of a full fleet made a refusal cost several admissions.
        presumed = self._walk.presumed
        return {"presumed_full": list(presumed)} if presumed else {}

    def _walked(self, kind: str) -> Event:
        walk = self._walk
        return self._event(
            kind,
            Level.WARNING,
            candidates=list(walk.candidates),
            denials={n: d.as_dict() for n, d in walk.denials.items()},
        )

    def _placed(self, admission: Admission, attempts: int, enforce_demand: bool) -> list[Event]:
        placement = admission.placement
        assert placement is not None
        node, request = admission.node, self._request
        stamp, ns = self._stamp, placement.namespace
        out = [
            stamp(
                PLACED,
                placement.id,
                ns,
                Level.INFO,
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
            out.append(stamp(UNGUARDED, placement.id, ns, Level.ERROR, node=placement.node))
        for bypassed in admission.bypassed:
            out.append(
                stamp(
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
                stamp(
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


def _dims(dimensions: Sequence[DimensionDetail]) -> list[dict[str, Any]]:
    return [d.as_dict() for d in dimensions]


__all__ = [
    "FAILED",
    "FINAL_CANDIDATES",
    "OVER_CLAIM",
    "OVER_GUARD",
    "PLACED",
    "REFUSED",
    "UNGUARDED",
    "WAIVING",
    "WRITE_FAILED",
    "PlacementFacts",
    "Stamp",
    "WalkReport",
]
