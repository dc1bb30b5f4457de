"""The accelerated-time loop: virtual time, rotations, the ledger following, failures survived."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from fleetgate.apps.up.runtime import UpRuntime
from fleetgate.apps.up.status import Rotation
from tests.apps.up.conftest import Up
from tests.invariants import check_ledger
from tests.waiting import HANG_SECONDS


async def test_a_tick_moves_virtual_time_by_exactly_its_span(up: Up) -> None:
    start = up.clock.now()
    await up.runtime.tick(timedelta(minutes=7, seconds=30), 0.0)
    assert up.clock.now() - start == timedelta(minutes=7, seconds=30)


def succeeded(up: Up) -> list[Rotation]:
    return [r for log in up.status.rotations.values() for r in log if r.outcome == "success"]


async def test_both_pools_rotate_within_a_virtual_day_and_the_ledger_follows_every_step(
    up: Up,
) -> None:
    real = 0.0
    for _ in range(72):  # 20-minute ticks: at most a virtual day
        real += 1.0
        await up.runtime.tick(timedelta(minutes=20), real)
        await check_ledger(up.ledger)
        if {r.pool for r in succeeded(up)} == {"general", "batch"}:
            break
    done = succeeded(up)
    assert {r.pool for r in done} == {"general", "batch"}
    ledger_nodes = {n.name for n in await up.ledger.nodes()}
    cluster_nodes = {c.name for c in up.cluster.claims.values() if c.ready}
    assert ledger_nodes == cluster_nodes  # the rotated nodes left, their replacements joined
    assert {r.claim for r in done} <= up.originals
    assert not ledger_nodes & {r.claim for r in done}
    assert up.workload.admitted > 0 and up.workload.released > 0
    assert up.status.reconciled is not None and up.status.reconciled["clean"]
    assert not up.cluster.breaches


async def test_a_failing_step_is_logged_and_time_goes_on(
    up: Up, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken() -> None:
        raise RuntimeError("database is locked")

    monkeypatch.setattr(up.workload, "step", broken)
    start = up.clock.now()
    await up.runtime.tick(timedelta(minutes=5), 10.0)
    await up.runtime.tick(timedelta(minutes=5), 20.0)
    assert up.clock.now() - start == timedelta(minutes=10)


async def test_run_stops_when_told(up: Up, monkeypatch: pytest.MonkeyPatch) -> None:
    ticked = asyncio.Event()
    tick = up.runtime.tick

    async def counted(span: timedelta, real_now: float) -> None:
        await tick(span, real_now)
        if up.runtime.ticks >= 2:
            ticked.set()

    monkeypatch.setattr(up.runtime, "tick", counted)
    stop = asyncio.Event()
    task = asyncio.create_task(up.runtime.run(stop))
    await asyncio.wait_for(ticked.wait(), timeout=HANG_SECONDS)
    stop.set()
    await asyncio.wait_for(task, timeout=HANG_SECONDS)
    assert up.clock.now() > up.status.started


def test_speed_must_be_positive(up: Up) -> None:
    with pytest.raises(ValueError, match="speed"):
        UpRuntime(
            clock=up.clock,
            cluster=up.cluster,
            controller=up.runtime.controller,
            sync=up.runtime.sync,
            workload=up.workload,
            reconcile=up.ledger.reconcile,
            status=up.status,
            speed=0,
        )


async def test_the_demo_s_estimates_match_what_it_simulates(up: Up) -> None:
    # The demo's pools used to provision in 2m and drain in 6m against the defaulted 5m/10m
    # estimates: once three rotations were observed, EstimateDisagreesWithObservation stayed on
    # the pool card for good.
    real = 0.0
    for _ in range(3 * 72):  # three virtual days in 20-minute ticks
        real += 1.0
        await up.runtime.tick(timedelta(minutes=20), real)
    checked = [c for report in up.status.reports.values() for c in report.estimates]
    assert {c.kind for c in checked} == {"provisioning", "drain"}  # enough rotations observed
    assert not [c for c in checked if c.disagrees]
    kinds, after = [], 0
    while batch := await up.ledger.events(after_id=after, limit=1000):
        kinds += [e.event.kind for e in batch]
        after = batch[-1].id
    assert "RotationStarted" in kinds and "EstimateDisagreesWithObservation" not in kinds


def test_the_controller_and_the_status_judge_with_one_ledger_gate(up: Up) -> None:
    """``up`` runs the node sync, so it sets ``controller.sync_ledger``: the controller and the
    API's status then take the same ledger gate from the composition root (before issue 41 the
    runtime handed the controller one by hand and the status said ``ledger_hold: null``)."""
    assert up.container.settings().controller.sync_ledger
    gate = up.container.relocation_check()
    assert up.container.rotation_controller().relocation is gate
