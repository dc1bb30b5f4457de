"""The capacity reconciler: one pass through the ledger, reported; and the loop that repeats it.

A pass is the ledger's (``CapacityLedger.reconcile``); the reconciler turns its report into audit
events (each correction is a bug signal, so it is loud), a log line, and the Prometheus series.
The loop never dies of a failed pass: the failure is counted and logged, and the next pass comes
at the next interval. Running two reconcilers at once is safe (their passes serialise on the
ledger's locks), merely wasteful.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import structlog

from fleetgate.apps.eventsink import with_request_id
from fleetgate.apps.reconciler.metrics import ReconcilerMetrics
from fleetgate.apps.services.audit import Trail
from fleetgate.apps.services.claims import EXPIRED, expired_event
from fleetgate.domain.capacity.reconcile import PassReport
from fleetgate.domain.events import Event, Level
from fleetgate.domain.ports import Clock, EventSink, LedgerReconciler

NODE_DRIFTED = "capacity counters drifted, corrected"
CLAIM_DRIFTED = "claim counters drifted, corrected"
CLUSTER_DRIFTED = "cluster counters drifted, corrected"
REATTRIBUTED = "placements re-attributed to their namespace claim"
CLAIM_EXPIRED = EXPIRED

_log = structlog.get_logger("fleetgate.reconciler")


def pass_events(report: PassReport) -> list[Event]:
    """The audit events a pass owes: one per correction and one per expired claim."""
    result = report.reconciliation
    at = result.at
    events: list[Event] = []
    for claim in result.expired:
        events.append(expired_event(claim, at))
    for node in result.nodes:
        if not node.drift.is_zero():
            events.append(
                Event(
                    NODE_DRIFTED,
                    at,
                    subject=node.name,
                    level=Level.WARNING,
                    data={
                        "drift": node.drift.as_dict(),
                        "used": node.used.as_dict(),
                        "stored_used": node.stored_used.as_dict(),
                    },
                )
            )
    for claim_result in result.claims:
        if not claim_result.drift.is_zero():
            events.append(
                Event(
                    CLAIM_DRIFTED,
                    at,
                    subject=claim_result.id,
                    namespace=claim_result.namespace,
                    level=Level.WARNING,
                    data={
                        "drift": claim_result.drift.as_dict(),
                        "used": claim_result.used.as_dict(),
                    },
                )
            )
    cluster_drift = {k: v.as_dict() for k, v in result.cluster.drift.items() if not v.is_zero()}
    if cluster_drift:
        events.append(
            Event(
                CLUSTER_DRIFTED,
                at,
                subject="cluster",
                level=Level.WARNING,
                data={"drift": cluster_drift, "created": result.cluster.created},
            )
        )
    if report.reattributed:
        events.append(
            Event(
                REATTRIBUTED,
                at,
                subject="placements",
                level=Level.WARNING,
                data={"placements": report.reattributed},
            )
        )
    return events


def _stamped_pass_events(report: PassReport) -> list[Event]:
    # Stamped with the API request's id (an admin's pass) before the ledger writes them: they
    # reach the table in the pass's transaction, past the sink that would otherwise stamp them.
    return [with_request_id(event) for event in pass_events(report)]


class Reconciler:
    """Runs reconcile passes against a ledger and reports each one."""

    def __init__(
        self,
        ledger: LedgerReconciler,
        clock: Clock,
        events: EventSink,
        metrics: ReconcilerMetrics,
        interval_seconds: float = 300.0,
    ) -> None:
        if interval_seconds <= 0:
            raise ValueError(
                f"reconciler.interval_seconds: must be positive, got {interval_seconds}"
            )
        self.ledger = ledger
        self.clock = clock
        self.events = events
        self.metrics = metrics
        self.interval_seconds = interval_seconds

    async def run_pass(self) -> PassReport:
        """One pass: reconcile, then events, log line and metrics. A failure is counted, then
        raised."""
        started = time.perf_counter()
        # Its corrections and expiries commit with the pass (the ledger's ``audit``).
        trail = Trail(_stamped_pass_events)
        try:
            report = await self.ledger.reconcile(audit=trail.events_of)
        except Exception as exc:
            self.metrics.record_failure(time.perf_counter() - started)
            _log.error("capacity reconcile pass failed", error=str(exc), kind=type(exc).__name__)
            raise
        self.metrics.record_pass(report, self.clock.now())
        summary = report.summary
        log = _log.info if summary.clean else _log.warning
        log(
            "capacity reconcile pass complete",
            nodes=summary.nodes,
            drifted_nodes=summary.drifted_nodes,
            drift=summary.drift.as_dict(),
            drifted_claims=summary.drifted_claims,
            cluster_drifted=summary.cluster_drifted,
            reattributed=summary.reattributed,
            claims_expired=summary.claims_expired,
            duration_seconds=round(summary.duration_seconds, 6),
        )
        # Emitted now only to the other sinks (the ledger's own sink skips what it wrote).
        await self.events.emit(trail.delivered(report))
        return report

    async def run(self, stop: asyncio.Event) -> int:
        """Pass, wait ``interval_seconds`` (or until ``stop`` is set), repeat; returns how many
        passes were attempted."""
        attempted = 0
        while not stop.is_set():
            attempted += 1
            # A failed pass is already counted and logged; the next interval tries again.
            with contextlib.suppress(Exception):
                await self.run_pass()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.interval_seconds)
        return attempted


__all__ = [
    "CLAIM_DRIFTED",
    "CLAIM_EXPIRED",
    "CLUSTER_DRIFTED",
    "NODE_DRIFTED",
    "REATTRIBUTED",
    "Reconciler",
    "pass_events",
]
