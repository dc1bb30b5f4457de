"""The logging event sink never raises, even when an event's data repeats its own fields."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import structlog
from structlog.testing import capture_logs

from fleetgate.apps import eventsink
from fleetgate.apps.eventsink import FanOutEventSink, LoggingEventSink
from fleetgate.domain.events import Event, Level


class Keep:
    def __init__(self) -> None:
        self.events: list[Event] = []

    async def emit(self, events: list[Event]) -> None:
        self.events.extend(events)


async def test_data_naming_the_events_own_fields_is_logged_not_raised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The over-claim audit event carries ``namespace`` in its data as well (capacity spec 4.5).
    event = Event(
        "placement admitted over namespace capacity claim",
        datetime(2024, 1, 1, tzinfo=UTC),
        "p-1",
        "ci",
        Level.WARNING,
        {"namespace": "ci", "subject": "x", "at": "y", "event": "z", "node": "n1"},
    )
    with capture_logs() as logs:
        # A fresh logger: the module's may be cached under a configuration an earlier test made.
        monkeypatch.setattr(eventsink, "_log", structlog.get_logger("fleetgate.events"))
        await LoggingEventSink().emit([event])  # raised TypeError before
    # One line at the event's level, with the event's own fields where the data repeats them.
    assert logs == [
        {
            "event": "placement admitted over namespace capacity claim",
            "log_level": "warning",
            "subject": "p-1",
            "namespace": "ci",
            "at": "2024-01-01T00:00:00+00:00",
            "node": "n1",
        }
    ]


async def test_fan_out_delivers_to_every_sink() -> None:
    first, second = Keep(), Keep()
    event = Event("k", datetime(2024, 1, 1, tzinfo=UTC))
    await FanOutEventSink(first, LoggingEventSink(), second).emit([event])
    assert first.events == second.events == [event]
