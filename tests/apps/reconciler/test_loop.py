"""The reconciler over a real ledger: a pass is reported as events, metrics and a log line;
the loop survives failed passes and stops when told."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
import sqlalchemy as sa
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.adapters.sql.schema import nodes
from fleetgate.apps.reconciler import loop
from fleetgate.apps.reconciler.loop import Reconciler
from fleetgate.apps.reconciler.metrics import ReconcilerMetrics
from fleetgate.domain.capacity.claims import ClaimRequest
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.errors import LedgerUnavailable
from fleetgate.domain.capacity.model import AdmitRequest, NodeSpec
from fleetgate.domain.capacity.reconcile import PassReport
from fleetgate.domain.events import Level
from fleetgate.domain.ports import AuditOf
from tests.waiting import HANG_SECONDS


def reconciler(
    ledger: object, clock: VirtualClock, interval: float = 300.0, events: object = None
) -> Reconciler:
    if events is None:
        events = ledger.event_sink() if isinstance(ledger, SqlLedger) else Counting(0)
    return Reconciler(
        ledger,  # type: ignore[arg-type]
        clock,
        events,  # type: ignore[arg-type]
        ReconcilerMetrics(CollectorRegistry()),
        interval,
    )


def sample(rec: Reconciler, name: str) -> float | None:
    return rec.metrics.registry.get_sample_value(name)


class Counting:
    """An event sink that sets ``reached`` once ``target`` passes have reported."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.batches = 0
        self.reached = asyncio.Event()

    async def emit(self, events: object) -> None:
        self.batches += 1
        if self.batches >= self.target:
            self.reached.set()


class Unreachable:
    """A ledger whose database is gone: every pass fails the way the SQL ledger reports it."""

    def __init__(self, target: int = 0) -> None:
        self.calls = 0
        self.target = target
        self.reached = asyncio.Event()

    async def reconcile(self, *, audit: AuditOf[PassReport] | None = None) -> PassReport:
        self.calls += 1
        if self.calls >= self.target:
            self.reached.set()
        raise LedgerUnavailable("reconcile capacity: cannot reach the database")


async def test_a_pass_reports_corrections_and_expiries_as_events(
    ledger: SqlLedger, clock: VirtualClock
) -> None:
    await ledger.add_node(NodeSpec("a", Capacity(4, 1024, 100)))
    await ledger.admit(AdmitRequest("web", "a", Resources(2, 100, 10)))
    made = await ledger.create_claim(ClaimRequest("ci", Resources(1, 0, 0), 60))
    assert made.claim is not None
    async with ledger.store.engine.begin() as conn:
        await conn.execute(sa.update(nodes).values(used_cpus=5))
    clock.advance(timedelta(seconds=60))
    rec = reconciler(ledger, clock)
    with capture_logs() as logs:
        report = await rec.run_pass()
    assert report.summary.drifted_nodes == 1 and report.summary.claims_expired == 1
    drifted = [r.event for r in await ledger.events(kind=loop.NODE_DRIFTED)]
    assert [(e.subject, e.level, e.data["drift"]["cpus"]) for e in drifted] == [
        ("a", Level.WARNING, -3)
    ]
    (expired,) = [r.event for r in await ledger.events(kind=loop.CLAIM_EXPIRED)]
    assert expired.namespace == "ci" and expired.subject == made.claim.id
    (line,) = [entry for entry in logs if entry["event"] == "capacity reconcile pass complete"]
    assert line["drifted_nodes"] == 1 and line["log_level"] == "warning"
    assert sample(rec, "fleetgate_capacity_reconcile_passes_total") == 1

    with capture_logs() as logs:
        again = await rec.run_pass()
    assert again.summary.clean
    assert [e["log_level"] for e in logs if e["event"].startswith("capacity reconcile")] == ["info"]
    assert len(await ledger.events(kind=loop.NODE_DRIFTED)) == 1


async def test_a_failed_pass_is_counted_and_raised(clock: VirtualClock) -> None:
    rec = reconciler(Unreachable(), clock)
    with pytest.raises(LedgerUnavailable):
        await rec.run_pass()
    assert sample(rec, "fleetgate_capacity_reconcile_failures_total") == 1
    assert sample(rec, "fleetgate_capacity_reconcile_passes_total") == 0


async def test_the_loop_survives_failures_and_stops_when_told(clock: VirtualClock) -> None:
    ledger = Unreachable(target=3)
    rec = reconciler(ledger, clock, interval=0.01)
    stop = asyncio.Event()
    task = asyncio.create_task(rec.run(stop))
    await asyncio.wait_for(ledger.reached.wait(), timeout=HANG_SECONDS)
    stop.set()
    attempted = await asyncio.wait_for(task, timeout=HANG_SECONDS)
    assert attempted >= 3
    assert sample(rec, "fleetgate_capacity_reconcile_failures_total") == attempted


async def test_the_loop_passes_every_interval(ledger: SqlLedger, clock: VirtualClock) -> None:
    events = Counting(2)
    rec = reconciler(ledger, clock, interval=0.02, events=events)
    stop = asyncio.Event()
    task = asyncio.create_task(rec.run(stop))
    await asyncio.wait_for(events.reached.wait(), timeout=HANG_SECONDS)
    stop.set()
    assert await asyncio.wait_for(task, timeout=HANG_SECONDS) >= 2
    assert (sample(rec, "fleetgate_capacity_reconcile_passes_total") or 0) >= 2


def test_a_non_positive_interval_is_refused_naming_the_setting(clock: VirtualClock) -> None:
    with pytest.raises(ValueError, match=r"reconciler\.interval_seconds"):
        reconciler(Unreachable(), clock, interval=0)
