"""Admission throughput and latency at the ledger, beside the raw ceiling of the same SQL.

For each backend, fleet size and number of concurrent writers: ``SqlLedger.admit`` onto a node
drawn at random (the guarded transaction, retries and all), then the captured statements of one
admission through the bare driver. Both run on the same seeded database, reset between runs,
and both end with the over-commit check.
"""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from benchmarks import group_commit, raw
from benchmarks.capture import DEMAND, TARGET_LOAD, Script, capture_admission
from benchmarks.group_commit import Batching
from benchmarks.invariants import Check, check
from benchmarks.report import rate
from benchmarks.seed import SIZE, open_ledger, reset, seed_nodes
from benchmarks.sizes import Sizes
from benchmarks.stats import Load, closed_loop
from benchmarks.targets import Target, fresh_database
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.domain.capacity.errors import LedgerUnavailable
from fleetgate.domain.capacity.model import AdmitRequest

NAMESPACE = "bench"


@dataclass
class Cell:
    """One measured configuration."""

    backend: str
    fleet: int
    writers: int
    path: str  # "ledger" | "ceiling" | "http"
    load: Load
    check: Check
    #: A ledger cell's group commit setting ("off" | "on"); "" for the other paths.
    group_commit: str = ""
    #: What the ledger batched in the measured admissions (None: not a group-commit-on cell).
    batching: Batching | None = None


def _warmup(writers: int) -> int:
    # Every ledger cell opens a fresh ledger: at least 16 admissions fill its statement caches.
    return min(64, max(16, writers * 4))


async def ledger_run(
    ledger: SqlLedger, names: list[str], writers: int, ops: int, max_seconds: float | None = None
) -> tuple[Load, Batching]:
    """``ops`` admissions through the ledger by ``writers`` concurrent writers, and the batching.

    The batching counters are read after the warm-up and after the measured admissions, so they
    count exactly the admissions the load measured.
    """
    rngs = [random.Random(w) for w in range(writers)]

    async def admit(w: int, _: int) -> str:
        node = names[rngs[w].randrange(len(names))]
        request = AdmitRequest(NAMESPACE, node, SIZE, demand=DEMAND, target_load=TARGET_LOAD)
        try:
            admission = await ledger.admit(request)
        except LedgerUnavailable:
            return "error"
        return "admitted" if admission.placement is not None else "refused"

    await closed_loop(writers, _warmup(writers), admit)
    before = group_commit.stats(ledger)
    load = await closed_loop(writers, ops, admit, max_seconds)
    after = group_commit.stats(ledger)
    return load, after.since(before)


async def ledger_cell(
    ledger: SqlLedger, names: list[str], writers: int, ops: int, max_seconds: float | None = None
) -> Load:
    """``ops`` admissions through the ledger by ``writers`` concurrent writers."""
    load, _ = await ledger_run(ledger, names, writers, ops, max_seconds)
    return load


async def ceiling_cell(
    target: Target,
    url: str,
    script: Script,
    names: list[str],
    writers: int,
    ops: int,
    max_seconds: float | None = None,
) -> Load:
    """The same admissions as the captured statements on bare driver connections."""
    conns = [await raw.connect(target.kind, url, target.session_variables) for _ in range(writers)]
    rngs = [random.Random(w) for w in range(writers)]

    async def admit(w: int, _: int) -> str:
        values: dict[str, Any] = {
            "node": names[rngs[w].randrange(len(names))],
            "namespace": NAMESPACE,
            "placement_id": str(uuid.uuid4()),
            "now": time.time(),
        }
        try:
            await conns[w].run(script, values)
        except Exception:  # the ceiling has no retry loop: a conflict is just counted
            return "error"
        return "admitted"

    try:
        await closed_loop(writers, _warmup(writers), admit)
        return await closed_loop(writers, ops, admit, max_seconds)
    finally:
        for conn in conns:
            await conn.close()


def cell_writers(sizes: Sizes, fleet: int) -> list[int]:
    """The writer counts of a fleet's ledger cells: the scaling fleet also sweeps 1 to 64."""
    extra = sizes.scaling_writers if fleet == sizes.scaling_fleet else ()
    return sorted({*sizes.writers, *extra})


async def run_target(target: Target, sizes: Sizes, console: Console) -> list[Cell]:
    """Every (fleet, writers) cell of one backend: the ledger with group commit off and on, and
    the ceiling (at the profile's writer counts; the 1-to-64 sweep is the ledger's alone).

    Each ledger cell opens a ledger of its own on the seeded database (so a setting and its
    counters start fresh); a long-lived one, with group commit off, seeds, resets and checks.
    """
    cells = []
    off = group_commit.SETTINGS["off"]
    for fleet in sizes.fleets:
        async with (
            fresh_database(target) as url,
            open_ledger(target, url, pool_size=2, group_commit=off) as base,
        ):
            with console.status(f"{target.label}: seeding {fleet:,} nodes"):
                names = await seed_nodes(base, fleet)
            script = await capture_admission(target, url, names[0])
            for writers in cell_writers(sizes, fleet):
                label = f"{target.label}, {fleet:,} nodes, {writers} writer(s)"
                for mode in group_commit.MODES:
                    await reset(base)
                    async with open_ledger(
                        target,
                        url,
                        pool_size=writers,
                        group_commit=group_commit.SETTINGS[mode],
                        migrate=False,
                    ) as ledger:
                        with console.status(f"{label}: ledger, group commit {mode}"):
                            load, batching = await ledger_run(
                                ledger, names, writers, sizes.admission_ops, sizes.cell_seconds
                            )
                    cell = Cell(
                        target.label, fleet, writers, "ledger", load, await check(base), mode
                    )
                    cell.batching = batching if mode == "on" else None
                    cells.append(cell)
                    console.print(f"  {_line(cell)}")
                if writers not in sizes.writers:
                    continue
                await reset(base)
                with console.status(f"{label}: raw driver"):
                    load = await ceiling_cell(
                        target, url, script, names, writers, sizes.admission_ops, sizes.cell_seconds
                    )
                cells.append(Cell(target.label, fleet, writers, "ceiling", load, await check(base)))
                console.print(f"  {_line(cells[-1])}")
    return cells


def find(
    cells: list[Cell], backend: str, fleet: int, writers: int, path: str, mode: str = ""
) -> Cell | None:
    """The one cell of that configuration, if it was measured."""
    for c in cells:
        key = (c.backend, c.fleet, c.writers, c.path, c.group_commit)
        if key == (backend, fleet, writers, path, mode):
            return c
    return None


def _line(cell: Cell) -> str:
    return (
        f"{cell.backend} {cell.fleet:,}n {cell.writers}w {cell.path} {cell.group_commit}: "
        f"{rate(cell.load.throughput)}/s p50 {cell.load.p(0.5):.2f} ms "
        f"p99 {cell.load.p(0.99):.2f} ms check {cell.check.summary()}"
    )


def ratio(cells: list[Cell], backend: str) -> list[float]:
    """Ledger (group commit off) / ceiling throughput for every (fleet, writers) of ``backend``.

    Like for like: both commit one admission per transaction, so the ratio is the client's cost.
    """
    out = []
    for c in cells:
        if c.backend != backend or c.path != "ledger" or c.group_commit != "off":
            continue
        ceiling = find(cells, backend, c.fleet, c.writers, "ceiling")
        if ceiling is not None and ceiling.load.throughput > 0:
            out.append(c.load.throughput / ceiling.load.throughput)
    return out
