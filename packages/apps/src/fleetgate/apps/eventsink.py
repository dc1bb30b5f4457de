"""Event sinks the composition root can choose: structured logs, and fan-out to several sinks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import structlog

from fleetgate.apps.logging import current_request_id
from fleetgate.domain.events import Event, Level
from fleetgate.domain.ports import EventSink

_log = structlog.get_logger("fleetgate.events")
_OWN_FIELDS = frozenset({"event", "subject", "namespace", "at"})


class LoggingEventSink:
    """Writes every event as one structured log line at the event's level."""

    async def emit(self, events: Sequence[Event]) -> None:
        """Log each event; never raises."""
        for ev in events:
            method = {Level.INFO: _log.info, Level.WARNING: _log.warning, Level.ERROR: _log.error}
            # Data keys that repeat the event's own fields (``namespace`` in an over-claim
            # event) must not collide with them as keyword arguments.
            data = {k: v for k, v in ev.data.items() if k not in _OWN_FIELDS}
            method[ev.level](
                ev.kind, subject=ev.subject, namespace=ev.namespace, at=ev.at.isoformat(), **data
            )


class FanOutEventSink:
    """Delivers to several sinks in order; one sink's failure does not stop the others."""

    def __init__(self, *sinks: EventSink) -> None:
        self._sinks = sinks

    async def emit(self, events: Sequence[Event]) -> None:
        """Deliver to each sink, logging (not raising) a sink's failure."""
        for sink in self._sinks:
            try:
                await sink.emit(events)
            except Exception:  # a sink must never break the operation that reported the event
                _log.exception("event sink failed", sink=type(sink).__name__)


class RequestIdEventSink:
    """Stamps the current request's id (``X-Request-ID``) into each event's data, then delivers.

    Events made outside a request (the reconciler, the controller) pass through unchanged.
    """

    def __init__(self, inner: EventSink) -> None:
        self._inner = inner

    async def emit(self, events: Sequence[Event]) -> None:
        """Deliver ``events`` to the inner sink, each carrying ``request_id`` when there is one."""
        await self._inner.emit([with_request_id(ev) for ev in events])


def with_request_id(event: Event) -> Event:
    """``event`` carrying the current request's id; the same object when it already does (or
    outside a request), so a sink that knows events by identity still knows it."""
    request_id = current_request_id()
    if request_id is None or event.data.get("request_id") == request_id:
        return event
    return replace(event, data={**event.data, "request_id": request_id})
