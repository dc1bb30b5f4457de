"""Room reservations: the destination room of a drain's relocation plan, held in the ledger
(issue 41, "reserve before you drain").

When a rotation begins draining a node whose relocation plan fits, the room each planned move
needs is reserved on its target, the way OpenStack Placement holds a migration's allocations
under a migration consumer: one :class:`Reservation` per placement to move, owned by the node
being drained, until ``expires_at``. The ledger charges a reservation to its destination node's
``used`` counters under the node guard, as an admission's node charge, so every admission path
sees reserved room as taken without knowing reservations exist. It charges nothing else: the
placement already counts once in the cluster's and its namespace's totals, and a move changes
neither.

A reservation charges allocation only, never expected demand: the demand charge is a placement's
own and is made when the placement arrives (the move into the reservation), so a reservation
that is never used leaves no demand behind. Its guard is evaluated at the plan's target load
(the demand clause, or the waiver where the plan waived it), with no demand of its own.

A reservation ends in exactly one of these ways, each one guarded write that credits its node
or hands its charge to the placement: the move into it (the move charges the destination
nothing more), a new reservation of the same owner (replaced whole), the rotation's end without
a drain, or the reconciler once ``expires_at`` has passed or its placement has left the owner
(released, or moved by someone else).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.capacity.dimensions import Resources
from fleetgate.domain.capacity.model import NodeState, Placement
from fleetgate.domain.capacity.relocation import Verdict
from fleetgate.domain.capacity.walk import Attempt

#: How long a reservation holds its room when nothing ends it sooner: long enough for the
#: drain to begin and the node sync to make the moves, short enough that room a lost
#: controller reserved comes back by itself.
DEFAULT_TTL = timedelta(minutes=15)


@dataclass(frozen=True)
class Reservation:
    """Room on ``node`` held for ``placement``'s move off ``owner`` (the node being drained)."""

    placement: str
    node: str
    resources: Resources
    owner: str
    expires_at: datetime


@dataclass(frozen=True)
class ReservationRequest:
    """One reservation to make, with the target load its node guard is evaluated at."""

    reservation: Reservation
    target_load: float


@dataclass(frozen=True)
class Reserved:
    """A reserve's outcome: ``made``, or the reservation the destination refused (nothing was
    written)."""

    made: bool
    refused: Reservation | None = None


def requests(
    verdict: Verdict,
    placements: Iterable[Placement],
    expires_at: datetime,
    policy: DemandPolicy,
) -> tuple[ReservationRequest, ...]:
    """The reservations that hold ``verdict``'s planned moves, in plan order (none for a plan
    that does not fit: a drain that would strand is held, never reserved)."""
    if not verdict.fits:
        return ()
    by_id = {p.id: p for p in placements}
    out = []
    for move in verdict.moves:
        placement = by_id.get(move.placement)
        if placement is None:
            continue
        load = Attempt(move.target, enforce_demand=not move.waived).target_load(policy.target_load)
        held = Reservation(placement.id, move.target, placement.resources, verdict.node, expires_at)
        out.append(ReservationRequest(held, load))
    return tuple(out)


def live(reservation: Reservation, now: datetime) -> bool:
    """Whether ``reservation`` still holds its room at ``now``."""
    return now < reservation.expires_at


def without_own(
    nodes: Sequence[NodeState], reservations: Iterable[Reservation], owner: str
) -> tuple[NodeState, ...]:
    """``nodes`` with ``owner``'s own reservations credited back: the room a node's plan may use
    includes what it already holds (a new reserve replaces them whole)."""
    held: dict[str, Resources] = {}
    for r in reservations:
        if r.owner == owner:
            held[r.node] = held.get(r.node, Resources()).plus(r.resources)
    return tuple(
        replace(n, used=n.used.minus_floored(held[n.name])) if n.name in held else n for n in nodes
    )


def unreserved(
    placements: Iterable[Placement], reservations: Iterable[Reservation]
) -> tuple[Placement, ...]:
    """The placements whose room is not already held on their owner's behalf (a reserved one
    already counts on its destination: counting it again would be counting it twice)."""
    reserved = {(r.placement, r.owner) for r in reservations}
    return tuple(p for p in placements if (p.id, p.node) not in reserved)


def per_node(reservations: Iterable[Reservation]) -> Mapping[str, Resources]:
    """Σ the reservations' resources per destination node."""
    out: dict[str, Resources] = {}
    for r in reservations:
        out[r.node] = out.get(r.node, Resources()).plus(r.resources)
    return out


__all__ = [
    "DEFAULT_TTL",
    "Reservation",
    "ReservationRequest",
    "Reserved",
    "live",
    "per_node",
    "requests",
    "unreserved",
    "without_own",
]
