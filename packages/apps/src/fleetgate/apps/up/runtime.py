"""The accelerated-time loop of ``fleetgate up``: one task drives everything but the HTTP server.

Every tick (a quarter of a real second) virtual time moves on by ``speed`` times the real time
that passed. The controller and the fake cluster are driven through that span by the simulator's
event-driven ``VirtualDriver`` (each controller pass at its own virtual instant), in slices short
enough that the node sync sees every drain start before the drain ends. Then, each on its own
real-time cadence: the node sync, the workload generator, the synthetic node metrics and the
reconcile pass. A failing step is logged and retried on the next tick: the demo must survive a
busy database.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import structlog

from fleetgate.apps.controller.shell import PassResult, RotationController
from fleetgate.apps.services.nodesync import NodeSync
from fleetgate.apps.settings import Settings
from fleetgate.apps.simulate.engine import VirtualDriver
from fleetgate.apps.up.fleet import PoolPlan, seed_cluster
from fleetgate.apps.up.status import UpStatus
from fleetgate.apps.up.workload import Workload
from fleetgate.domain.ports import SimulatedCluster

_log = structlog.get_logger("fleetgate.up")

TICK = 0.25
"""Real seconds between ticks."""
UNLIMITED = 2**62
SLICE = timedelta(minutes=2)
"""Longest virtual span driven without a node sync in between (shorter than any drain)."""


@dataclass(frozen=True)
class Cadence:
    """Real seconds between the periodic steps of a tick."""

    sync: float = 2.0
    workload: float = 0.4
    metrics: float = 2.0
    reconcile: float = 5.0


def cadence_for(settings: Settings, speed: float) -> Cadence:
    """The reconcile pass every ``reconciler.interval_seconds`` of virtual time, but at most
    once a real second: at 600x the demand charges decay in a real second, and a pass is what
    snaps the counters to their decayed sum."""
    return Cadence(reconcile=max(1.0, settings.reconciler.interval_seconds / speed))


async def seed(
    cluster: SimulatedCluster,
    clock: Any,
    sync: NodeSync,
    workload: Workload,
    plans: Sequence[PoolPlan],
    share: float | None = None,
) -> None:
    """Put the sample fleet on the cluster, mirror it in the ledger, and place the starting
    workload (``share`` of the capacity; the workload's default when None)."""
    seed_cluster(cluster, plans, clock.now())
    await sync.sync()
    await (workload.seed() if share is None else workload.seed(share=share))


@dataclass
class _Due:
    last: dict[str, float] = field(default_factory=dict)

    def due(self, name: str, every: float, now: float) -> bool:
        if now - self.last.get(name, float("-inf")) >= every:
            self.last[name] = now
            return True
        return False


class UpRuntime:
    """Drives the controller, the cluster, the node sync and the workload in accelerated time."""

    def __init__(
        self,
        *,
        clock: Any,
        cluster: SimulatedCluster,
        controller: RotationController,
        sync: NodeSync,
        workload: Workload,
        reconcile: Callable[[], Awaitable[Any]],
        status: UpStatus,
        speed: float,
        cadence: Cadence | None = None,
    ) -> None:
        if speed <= 0:
            raise ValueError(f"speed: must be positive, got {speed}")
        self.clock = clock
        self.cluster = cluster
        self.controller = controller
        self.sync = sync
        self.workload = workload
        self.reconcile = reconcile
        self.status = status
        self.speed = speed
        self.cadence = cadence or Cadence()
        # No pass budget: `up` runs until it is stopped, not until a simulation is complete.
        self.driver = VirtualDriver(controller, cluster, clock, budget=UNLIMITED)
        self.ticks = 0
        self._dirty = True
        self._due = _Due()
        previous = controller.on_pass

        def on_pass(result: PassResult) -> None:
            if result.applied:
                self._dirty = True  # the controller changed the cluster: the ledger follows
            status.on_pass(result, clock.now())
            if previous is not None:
                previous(result)

        controller.on_pass = on_pass
        cluster.subscribe(lambda _change: self._mark_dirty())

    def _mark_dirty(self) -> None:
        self._dirty = True

    async def run(self, stop: asyncio.Event) -> None:
        """Tick until ``stop`` is set."""
        last = time.monotonic()
        while not stop.is_set():
            now = time.monotonic()
            await self.tick(timedelta(seconds=(now - last) * self.speed), now)
            last = now
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=TICK)

    async def tick(self, span: timedelta, real_now: float) -> None:
        """Advance virtual time by ``span``, then run whatever is due in real time."""
        self.ticks += 1
        target: datetime = self.clock.now() + span
        while self.clock.now() < target:
            end = min(target, self.clock.now() + SLICE)
            if await self._step("controller", self.driver.run_until(end)) is None:
                self.cluster.advance_to(end)  # virtual time goes on even when a pass failed
            if self._dirty:
                await self._sync()
        if self._due.due("sync", self.cadence.sync, real_now):
            await self._sync()
        if self._due.due("workload", self.cadence.workload, real_now):
            await self._step("workload", self.workload.step())
        if self._due.due("metrics", self.cadence.metrics, real_now):
            await self._step("metrics", self.workload.publish_metrics())
        if self._due.due("reconcile", self.cadence.reconcile, real_now):
            report = await self._step("reconcile", self.reconcile())
            if report is not None:
                self.status.on_reconcile(report, self.clock.now())

    async def _sync(self) -> None:
        self._dirty = False
        report = await self._step("node sync", self.sync.sync())
        if report is None:
            self._dirty = True  # failed: try again next slice

    async def _step(self, what: str, work: Awaitable[Any]) -> Any:
        try:
            return await work
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # one failed step must not end the demo; the next tick retries
            _log.warning("step failed; retrying next tick", step=what, error=str(exc))
            return None
