"""Clocks: the wall clock, and a manually advanced virtual clock for simulation and tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class SystemClock:
    """Real UTC time."""

    def now(self) -> datetime:
        """Return the current wall-clock time in UTC."""
        return datetime.now(UTC)


class VirtualClock:
    """Time that moves only when told to: the simulator and the fake cluster run on it."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("VirtualClock start must be timezone-aware")
        self._now = start.astimezone(UTC)

    def now(self) -> datetime:
        """Return the virtual instant."""
        return self._now

    def advance(self, by: timedelta) -> datetime:
        """Move time forward by ``by`` (never backwards) and return the new instant."""
        if by < timedelta(0):
            raise ValueError("virtual time cannot run backwards")
        self._now += by
        return self._now

    def set(self, to: datetime) -> datetime:
        """Jump to ``to`` if it is later than now; earlier instants are ignored."""
        if to > self._now:
            self._now = to.astimezone(UTC)
        return self._now
