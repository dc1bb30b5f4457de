"""Drive a controller and a simulated cluster through virtual time, event by event.

Idle time costs nothing: after each round the clock jumps straight to the next instant at which
something can happen — a pool's requeue, a completion the cluster has queued (a node becoming
Ready, a drain ending, a forced expiry), or the end. A pass that reported that a pass over the
pool it leaves would write nothing before some instant (``Step.quiet_until`` when it wrote
nothing, ``Step.settled_until`` when it wrote) has the passes in between folded away, keeping to
the controller's own requeue grid, so the outcome is what a real controller would do: every
skipped pass is one at which nothing can have changed. Any change the cluster makes on its own
wakes the pool at once. ``verify=True`` folds nothing that has an end and instead checks, pass
by pass, that each pass that would have been skipped indeed wrote nothing (``violations``; for
tests); a pool that can change only with the cluster is left asleep as without it.
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
        verify: bool = False,
    ) -> None:
        self.controller = controller
        self.cluster = cluster
        self.clock = clock
        self.budget = budget
        self.passes = 0
        self.exhausted = False
        self.on_advance = on_advance
        self.verify = verify
        self.violations: list[str] = []
        """Passes that wrote though a fold would have skipped them (``verify`` only)."""
        self._promised: dict[str, datetime] = {}

    async def run_until(self, end: datetime) -> bool:
        """Advance to ``end``; False when the pass budget ran out first (the run is partial)."""
        # The callback also hears each happening the cluster applies, in whatever call, so a
        # caller bounding the run's wall-clock time can stop it inside a long catch-up.
        self.cluster.watch(self.on_advance)
        try:
            return await self._run_until(end)
        finally:
            self.cluster.watch(None)

    async def _run_until(self, end: datetime) -> bool:
        while True:
            results = await self.controller.run_due()
            self.passes += len(results)
            for result in results:
                self._fold(result)
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
                self._promised.clear()  # the pools changed: no promise covers them now
            if target > now:
                self._move(target)

    def changed(self) -> None:
        """The cluster changed outside its own events (a fault a test injects): wake every
        pool, as a watch would, and hold no promise about the pools as they were."""
        self.controller.poke()
        self._promised.clear()

    def _move(self, instant: datetime) -> None:
        self.cluster.advance_to(instant)
        if self.on_advance is not None:
            self.on_advance(instant)

    def _fold(self, result: PassResult) -> None:
        step = result.step
        if step is None:
            return
        now = self.clock.now()
        if self.verify:
            promised = self._promised.get(result.pool)
            if promised is not None and now < promised and step.writes:
                self.violations.append(
                    f"pool {result.pool}: the pass at {now.isoformat()} wrote, though a pass "
                    f"promised none would before {promised.isoformat()}"
                )
        if result.requeue_at is None or result.interrupted is not None:
            return
        if self.controller.due.get(result.pool) != result.requeue_at:
            return  # the pass asked to be looked at sooner (a status write's recheck)
        quiet = step.settled_until if step.writes else step.quiet_until
        if step.writes and quiet is None:
            return  # no promise about the pool these writes leave: look again as requeued
        cadence = result.requeue_at - now
        if cadence <= timedelta(0):
            return
        if quiet is None:
            # Only a change in the cluster can matter; the cluster's next event wakes the pool.
            # Folded even when verifying: checking it would mean a pass a minute for as long as
            # the pool stands idle (weeks of an ungoverned or fatal pool in a test).
            self.controller.due[result.pool] = datetime.max.replace(tzinfo=now.tzinfo)
            return
        if quiet <= result.requeue_at:
            return
        # The first requeue on the pool's own grid at or after the quiet period ends.
        ticks = math.ceil((quiet - now) / cadence)
        self._fold_to(result.pool, now + ticks * cadence)

    def _fold_to(self, pool: str, due: datetime) -> None:
        if self.verify:
            self._promised[pool] = due  # run the passes, and check they write nothing
            return
        self.controller.due[pool] = due
