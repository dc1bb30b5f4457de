"""Protocols the outside world must satisfy. Adapters implement them; services depend on them.

Each area owns one section below. A port says *what* must happen, never how: the SQL ledger, the
fake cluster and the Karpenter gateway are interchangeable behind these.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from fleetgate.domain.events import Event

# --- time and events -------------------------------------------------------------------------


@runtime_checkable
class Clock(Protocol):
    """The source of "now". Real time in production, virtual time in the simulator and tests."""

    def now(self) -> datetime:
        """Return the current instant as a timezone-aware UTC datetime."""
        ...


@runtime_checkable
class EventSink(Protocol):
    """Where events go: the audit table, logs, Kubernetes Events. Must never raise on delivery."""

    async def emit(self, events: Sequence[Event]) -> None:
        """Record the events, in order. Best-effort: a failed delivery is logged, not raised."""
        ...


# --- capacity ledger (issue: capacity admission) ---------------------------------------------

# --- cluster gateway (issue: rotation controller) --------------------------------------------
