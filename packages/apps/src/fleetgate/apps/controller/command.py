"""``fleetgate controller``: take the controller from the composition root and run it.

Policies come from the files named in ``controller.policies`` and, when the cluster backend
carries RotationPolicy objects (Karpenter), from the cluster as well; they are re-read on every
pass, so editing a policy takes effect without a restart.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta

import structlog
from prometheus_client import CollectorRegistry

from fleetgate.apps.container import build_container
from fleetgate.apps.controller.endpoints import ControllerEndpoints
from fleetgate.apps.controller.runtime import PreflightFailed, run_on_cluster
from fleetgate.apps.controller.shell import PassResult, RotationController
from fleetgate.apps.logging import configure_logging
from fleetgate.apps.policyfile import PolicyFileError
from fleetgate.apps.settings import ConfigError, Settings
from fleetgate.apps.signals import cancelled_on_signals
from fleetgate.apps.startup import invalid, start_ledger
from fleetgate.domain.ports import LedgerLifecycle
from fleetgate.domain.rotation.constants import LONG_REQUEUE

_log = structlog.get_logger("fleetgate.controller")
ROUND_RETRY = timedelta(seconds=5)


async def run_loop(
    controller: RotationController,
    *,
    once: bool,
    stop: asyncio.Event | None = None,
    wake: asyncio.Event | None = None,
    after_round: Callable[[], Awaitable[object]] | None = None,
) -> list[PassResult]:
    """Run passes as pools fall due (real time) until ``stop`` is set; ``once``: one round.

    ``wake`` (set by a watch that poked a pool) cuts the wait short; ``after_round`` runs after
    every round (the ledger's node sync).
    """
    if once:
        results = await controller.run_once()
        if after_round is not None:
            await after_round()
        return results
    stop = stop or asyncio.Event()
    while not stop.is_set():
        try:
            await controller.run_due()
            if after_round is not None:
                await after_round()
        except PolicyFileError:
            raise
        except Exception as exc:
            # The API server restarting or throttling must not end the controller: every pass
            # re-reads the cluster, so the next round simply tries again.
            _log.warning("pass round failed; retrying", error=str(exc), kind=type(exc).__name__)
            controller.poke()
            await _pause(stop, None, ROUND_RETRY.total_seconds())
            continue
        due = controller.next_due()
        now = controller.clock.now()
        wait = LONG_REQUEUE if due is None else min(max(due - now, timedelta(0)), LONG_REQUEUE)
        await _pause(stop, wake, max(wait.total_seconds(), 0.05))
    return []


async def _pause(stop: asyncio.Event, wake: asyncio.Event | None, seconds: float) -> None:
    """Sleep up to ``seconds``; return early when ``stop`` or ``wake`` is set (and reset wake)."""
    waiters = [asyncio.ensure_future(e.wait()) for e in (stop, wake) if e is not None]
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
    if wake is not None:
        wake.clear()


def run_controller(once: bool) -> int:
    """Entry point of ``fleetgate controller``: 0 when it ran, 2 on invalid configuration."""
    try:
        container = build_container()
        settings = container.settings()
        configure_logging(settings.log_format)
        controller = container.rotation_controller()
        ledger: LedgerLifecycle | None = (
            container.ledger() if settings.controller.sync_ledger else None
        )
    except (ConfigError, PolicyFileError, LookupError, ValueError) as exc:
        return invalid(str(exc))
    if ledger is None:
        return asyncio.run(_main(controller, once, settings, container.metrics_registry()))

    async def with_ledger() -> int:
        await start_ledger(ledger, settings.database_url)  # else one line, exit 1 (cli.main)
        try:
            sync = container.node_sync()  # the controller's ledger gate is the container's wiring
            return await _main(controller, once, settings, container.metrics_registry(), sync.sync)
        finally:
            await ledger.close()

    return asyncio.run(with_ledger())


async def _main(
    controller: RotationController,
    once: bool,
    settings: Settings,
    registry: CollectorRegistry,
    after_round: Callable[[], Awaitable[object]] | None = None,
) -> int:
    ctl = settings.controller
    # --once is a one-shot job: no listeners; it still waits for the Lease, never acting
    # beside a running leader.
    endpoints = (
        None
        if once
        else ControllerEndpoints(
            registry,
            lambda: False,
            host=ctl.endpoints_host,
            metrics_port=ctl.metrics_port,
            probes_port=ctl.probes_port,
        )
    )
    try:
        with cancelled_on_signals():
            results = await run_on_cluster(
                controller,
                lambda wake: run_loop(controller, once=once, wake=wake, after_round=after_round),
                leader_election=ctl.leader_election,
                endpoints=endpoints,
            )
    except PreflightFailed as exc:
        _log.error("preflight failed; not starting", error=str(exc))
        return 1
    except PolicyFileError as exc:
        _log.error("cannot read the policies", error=str(exc))
        return 2
    except (KeyboardInterrupt, asyncio.CancelledError):
        return 0  # SIGTERM/SIGINT: the loop stopped and the Lease was released
    for result in results:
        report = result.step.report if result.step else None
        _log.info(
            "pass",
            nodepool=result.pool,
            anchor=report.anchor if report else None,
            reason=report.reason if report else "gone",
            interrupted=result.interrupted,
        )
    if once:
        print(once_summary(results), flush=True)
    return 0


def once_summary(results: Sequence[PassResult]) -> str:
    """What ``controller --once`` did: the pools it saw, and per pool the actions it took."""
    actions = sum(len(result.applied) for result in results)
    lines = [f"controller --once: {len(results)} pool(s) seen, {actions} action(s) taken"]
    for result in results:
        report = result.step.report if result.step else None
        done = ", ".join(type(action).__name__ for action in result.applied) or "no action"
        why = report.reason if report else "the pool is gone"
        lines.append(f"  {result.pool}: {done} ({why})")
    return "\n".join(lines)
