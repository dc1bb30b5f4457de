"""The services' audit events: stamped by the service's clock, each recurring shape built once.

A change's events are built by the ledger inside the change's transaction (a :class:`Trail`
handed to it as ``audit``), so they commit with the change; the service then emits the very same
objects to its other sinks (the ledger's own sink knows them and skips them).

A walk reports a candidate's refusal and the walk's outcome the same way whether it places, moves
or relocates a placement; only the event names (capacity spec 4.5) differ.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from fleetgate.apps.eventsink import with_request_id
from fleetgate.domain.capacity.denials import Denial
from fleetgate.domain.capacity.walk import Attempt, Walk
from fleetgate.domain.events import Event, Level
from fleetgate.domain.ports import Clock

R = TypeVar("R")

# A node's changes, whoever makes them (node sync following the cluster, the admin through the
# API): one name per meaning, so the trail reads the same whichever wrote it.
NODE_JOINED = "node joined the ledger"
NODE_UPDATED = "node updated in the ledger"
NODE_LEFT = "node left the ledger"
NODE_CORDONED = "node cordoned in the ledger"
NODE_UNCORDONED = "node uncordoned in the ledger"


class Trail(Generic[R]):
    """The audit of one change: ``build`` turns its result into its events, called by the
    ledger inside the change's transaction (``events_of`` is the ledger's ``audit``)."""

    def __init__(self, build: Callable[[R], Sequence[Event]]) -> None:
        self._build = build
        self._written: list[Event] | None = None

    def events_of(self, result: R) -> list[Event]:
        """The events for ``result``, kept as the ones written (a retry builds them again)."""
        self._written = list(self._build(result))
        return self._written

    def delivered(self, result: R) -> list[Event]:
        """The events to emit once the change committed: those it wrote, or built now."""
        # A ledger that does not write an audit in its transaction leaves it to the sink.
        return self._written if self._written is not None else list(self._build(result))


class AuditEvents:
    """Builds one service's audit events on its clock."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock

    def __call__(
        self,
        kind: str,
        subject: str,
        namespace: str | None,
        level: Level = Level.INFO,
        /,
        **data: object,
    ) -> Event:
        """An event of ``kind`` about ``subject``, stamped now (and with the API request's id:
        an admission's events are written in its transaction, past any sink that would add it)."""
        return with_request_id(
            Event(kind, self._clock.now(), subject, namespace, level, dict(data))
        )

    def node(self, kind: str, node: str, /, **data: object) -> list[Event]:
        """A node change's one event (about no namespace): written with the change (its
        ``audit``), then emitted to the other sinks (the ledger's own sink skips it)."""
        return [self(kind, node, None, Level.INFO, node=node, **data)]

    def refused(
        self, kind: str, subject: str, namespace: str, step: Attempt, denial: Denial
    ) -> Event:
        """A candidate's refusal: its node, whether the demand clause was on, the denial."""
        return self(
            kind,
            subject,
            namespace,
            node=step.node,
            enforce_demand=step.enforce_demand,
            **denial.as_dict(),
        )

    def walked(
        self, kind: str, subject: str, namespace: str, walk: Walk, /, **data: object
    ) -> Event:
        """A warning naming the walk's candidates so far and every refusal they gave."""
        return self(
            kind,
            subject,
            namespace,
            Level.WARNING,
            **data,
            candidates=list(walk.candidates),
            denials={n: d.as_dict() for n, d in walk.denials.items()},
        )
