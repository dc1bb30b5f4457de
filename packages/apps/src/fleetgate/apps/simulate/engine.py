"""Drive a controller and a simulated cluster through virtual time, event by event.

Idle time costs nothing: after each round the clock jumps straight to the next instant at which
something can happen — a pool's requeue, a completion the cluster has queued (a node becoming
Ready, a drain ending, a forced expiry), or the end. A pass that wrote nothing and reported that
nothing can change before some instant (``Step.quiet_until``) has its skipped passes folded away,
keeping to the controller's own requeue grid so the outcome is what a real controller would do.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from fleetgate.apps.controller.shell import PassResult, RotationController
from fleetgate.domain.ports import SimulatedCluster

DEFAULT_BUDGET = 2_000_000


class VirtualDriver:
    """Runs ``controller`` against ``cluster`` on ``clock`` (a VirtualClock) until an instant.

    ``cluster`` runs in virtual time (the ``SimulatedCluster`` port; the fake cluster does).
    """

    def __init__(
        self,
        controller: RotationController,
        cluster: SimulatedCluster,
        clock: Any,
        *,
        budget: int = DEFAULT_BUDGET,
        on_advance: Callable[[datetime], None] | None = None,
    ) -> None:
        self.controller = controller
        self.cluster = cluster
        self.clock = clock
        self.budget = budget
        self.passes = 0
        self.exhausted = False
        self.on_advance = on_advance

    async def run_until(self, end: datetime) -> bool:
        """Advance to ``end``; False when the pass budget ran out first (the run is partial)."""
        while True:
            results = await self.controller.run_due()
            self.passes += len(results)
            for result in results:
                self._fold_idle(result)
            if self.passes >= self.budget:
                self.exhausted = True
                return False
            now = self.clock.now()
            due = self.controller.next_due()
            event = self.cluster.next_event_at()
            targets = [t for t in (due, event) if t is not None]
            target = min(targets) if targets else None
            if target is None or target > end:
                self._move(end)
                return True
            if event is not None and event == target:
                self.controller.poke()  # a watch would wake every pool on this change
            if target > now:
                self._move(target)

    def _move(self, instant: datetime) -> None:
        self.cluster.advance_to(instant)
        if self.on_advance is not None:
            self.on_advance(instant)

    def _fold_idle(self, result: PassResult) -> None:
        step = result.step
        if step is None or step.writes or result.requeue_at is None:
            return
        if result.interrupted is not None:
            return
        now = self.clock.now()
        cadence = result.requeue_at - now
        if cadence <= timedelta(0):
            return
        quiet = step.quiet_until
        if quiet is None:
            # Only a change in the cluster can matter; the cluster's next event wakes the pool.
            self.controller.due[result.pool] = datetime.max.replace(tzinfo=now.tzinfo)
            return
        if quiet <= result.requeue_at:
            return
        # The first requeue on the pool's own grid at or after the quiet period ends.
        ticks = math.ceil((quiet - now) / cadence)
        self.controller.due[result.pool] = now + ticks * cadence
