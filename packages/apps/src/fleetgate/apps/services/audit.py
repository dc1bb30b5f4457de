"""The services' audit events: stamped by the service's clock, each recurring shape built once.

A walk reports a candidate's refusal and the walk's outcome the same way whether it places, moves
or relocates a placement; only the event names (capacity spec 4.5) differ.
"""

from __future__ import annotations

from fleetgate.apps.eventsink import with_request_id
from fleetgate.domain.capacity.denials import Denial
from fleetgate.domain.capacity.walk import Attempt, Walk
from fleetgate.domain.events import Event, Level
from fleetgate.domain.ports import Clock


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
