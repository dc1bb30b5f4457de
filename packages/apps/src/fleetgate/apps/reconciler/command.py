"""``fleetgate reconciler``: reconcile the capacity ledger every interval, or once.

``--once`` runs one pass, prints its report and exits 0 when nothing had drifted, 1 when the pass
corrected drift (a bug signal worth a look) or failed, 2 on invalid configuration. Without it the
loop runs until SIGINT/SIGTERM (exit 0), serving its Prometheus series on
``reconciler.metrics_port`` (exit 1 if that port cannot be bound).
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from prometheus_client import start_http_server
from rich.console import Console
from rich.markup import escape

from fleetgate.apps.reconciler.loop import Reconciler
from fleetgate.apps.reconciler.report import render
from fleetgate.apps.redaction import redact
from fleetgate.apps.settings import Settings
from fleetgate.apps.signals import stop_on_signals
from fleetgate.apps.startup import StartupFailed, invalid, start_ledger
from fleetgate.domain.ports import LedgerLifecycle

_log = structlog.get_logger("fleetgate.reconciler")


async def run_once(reconciler: Reconciler, console: Console) -> int:
    """One pass, its report printed: 0 clean, 1 drift corrected or the pass failed."""
    try:
        report = await reconciler.run_pass()
    except Exception as exc:
        console.print(
            f"[red]reconcile pass failed:[/red] {escape(redact(str(exc)))}", highlight=False
        )
        return 1
    render(report, console)
    return 0 if report.summary.clean else 1


async def run_loop(reconciler: Reconciler, settings: Settings, registry: Any) -> int:
    """Every interval until a signal; the metrics are served while it runs."""
    config = settings.reconciler
    server = None
    if config.metrics_port is not None:
        try:
            server, _thread = start_http_server(
                config.metrics_port, addr=config.metrics_host, registry=registry
            )
        except OSError as exc:
            where = f"{config.metrics_host}:{config.metrics_port}"
            raise StartupFailed(
                f"cannot serve the metrics on {where}: {exc.strerror or exc}"
            ) from exc
    stop = asyncio.Event()
    try:
        with stop_on_signals(stop):
            _log.info("reconciler started", interval_seconds=reconciler.interval_seconds)
            await reconciler.run(stop)
    finally:
        if server is not None:
            server.shutdown()
    _log.info("reconciler stopped")
    return 0


async def main(container: Any, once: bool, interval: float | None) -> int:
    """Open the ledger, run once or loop, close the ledger; the exit code."""
    settings: Settings = container.settings()
    reconciler: Reconciler = container.reconciler()
    if interval is not None:
        reconciler.interval_seconds = interval
    ledger: LedgerLifecycle = container.ledger()
    await start_ledger(ledger, settings.database_url)  # else one line, exit 1 (cli.main)
    try:
        if once:
            return await run_once(reconciler, Console())
        return await run_loop(reconciler, settings, container.metrics_registry())
    finally:
        await ledger.close()


def run_reconciler(once: bool, interval: float | None) -> int:
    """Entry point of ``fleetgate reconciler``."""
    from fleetgate.apps.container import build_container
    from fleetgate.apps.logging import configure_logging
    from fleetgate.apps.settings import ConfigError

    try:
        container = build_container()
        configure_logging(container.settings().log_format)
        container.reconciler()
    except (ConfigError, LookupError, ValueError) as exc:
        return invalid(str(exc))
    return asyncio.run(main(container, once, interval))


__all__ = ["main", "run_loop", "run_once", "run_reconciler"]
