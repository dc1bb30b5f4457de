"""How ``fleetgate controller`` runs on a real cluster: preflight, leader election, then the loop.

Against a cluster backend that offers ``ClusterRuntime`` (Karpenter), the order is fixed:

1. connect, and **preflight**: fail fast, before campaigning, when the cluster cannot serve the
   controller (Karpenter v1 missing, RBAC too narrow), with the backend's actionable message;
2. **leader election**: of all replicas only the Lease holder runs the loop. Every replica that
   passed preflight is Ready (a standby is what a rollout needs); leadership is reported apart
   from readiness (``fleetgate_controller_leader``, ``/leaderz``). A replica that loses the Lease
   has its loop cancelled mid-pass (safe: every pass re-reads the cluster and every write is
   idempotent or conditional) and campaigns again;
3. the **loop**; on SIGTERM/SIGINT it is cancelled and the Lease is released, so the other
   replica takes over at once.

The fake cluster offers none of this: the loop just runs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import structlog

from fleetgate.apps.controller.endpoints import ControllerEndpoints
from fleetgate.apps.controller.shell import PassResult, RotationController
from fleetgate.domain.ports import ClusterRuntime, Leadership

_log = structlog.get_logger("fleetgate.controller")


class PreflightFailed(RuntimeError):
    """The cluster cannot run the controller; the message is the backend's actionable one."""


async def run_on_cluster(
    controller: RotationController,
    loop: Callable[[asyncio.Event], Awaitable[list[PassResult]]],
    *,
    leader_election: bool = True,
    endpoints: ControllerEndpoints | None = None,
) -> list[PassResult]:
    """Preflight, campaign, run ``loop`` while leading; return what the loop returned.

    ``loop`` gets an event that the cluster's watches set when they poke a pool.
    """
    cluster = controller.cluster
    runtime = cluster if isinstance(cluster, ClusterRuntime) else None
    elector: Leadership | None = None
    running = False
    serving = False  # preflight passed: this replica leads or stands by
    results: list[PassResult] = []

    def leading() -> bool:
        return elector.is_leader if elector is not None else running

    if endpoints is not None:
        endpoints.ready = lambda: serving
        endpoints.leading = leading
        await endpoints.start()
    try:
        if runtime is not None:
            await runtime.start()
            try:
                await runtime.preflight()
            except Exception as exc:
                raise PreflightFailed(str(exc)) from exc
            if leader_election:
                elector = runtime.leader_elector()
        serving = True

        async def work() -> None:
            nonlocal running
            running = True
            wake = asyncio.Event()

            def poke(pool: str | None) -> None:
                controller.poke(pool)
                wake.set()

            # Watches only while acting: a standby has nothing to wake.
            watcher = asyncio.create_task(runtime.watch(poke)) if runtime is not None else None
            try:
                results.extend(await loop(wake))
            finally:
                running = False
                if watcher is not None:
                    watcher.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await watcher

        if elector is None:
            await work()
        else:
            _log.info("waiting for leadership before acting")
            await elector.run(work)
        return results
    finally:
        if endpoints is not None:
            await endpoints.stop()
        if runtime is not None:
            await runtime.close()
