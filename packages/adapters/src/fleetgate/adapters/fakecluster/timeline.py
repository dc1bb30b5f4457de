"""The fake cluster's queue of timed happenings: what falls due, in time order.

Things that take time (a claim launching, a drain, a forced expiry) are queued at exact instants
and applied whenever the cluster is touched after the clock has passed them. Whether a queued
happening still applies is the lifecycle's to say (``still_due``): a cancelled one is skipped.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator
from datetime import datetime

#: Whether the happening (kind, name) still applies.
StillDue = Callable[[str, str], bool]


class Timeline:
    """Happenings by instant (ties in the order they were queued)."""

    def __init__(self, seq: itertools.count[int]) -> None:
        self._queue: list[tuple[datetime, int, str, str]] = []
        self._seq = seq

    def at(self, at: datetime, kind: str, name: str) -> None:
        """Queue happening ``kind`` of ``name`` at ``at``."""
        heapq.heappush(self._queue, (at, next(self._seq), kind, name))

    def next_at(self, still_due: StillDue) -> datetime | None:
        """The instant of the next happening that still applies (None: nothing is due)."""
        queue = self._queue
        while queue and not still_due(queue[0][2], queue[0][3]):
            heapq.heappop(queue)
        return queue[0][0] if queue else None

    def due(self, now: datetime, still_due: StillDue) -> Iterator[tuple[datetime, str, str]]:
        """Take out, in time order, each happening due by ``now`` that still applies; one
        queued while the caller handles another is met in its turn."""
        queue = self._queue
        while queue and queue[0][0] <= now:
            at, _, kind, name = heapq.heappop(queue)
            if still_due(kind, name):
                yield at, kind, name
