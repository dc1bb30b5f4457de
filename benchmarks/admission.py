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

from benchmarks import raw
from benchmarks.capture import DEMAND, TARGET_LOAD, Script, capture_admission
from benchmarks.invariants import Check, check
from benchmarks.report import Table, ms, rate
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


def _warmup(writers: int) -> int:
    return min(64, writers * 4)


async def ledger_cell(
    ledger: SqlLedger, names: list[str], writers: int, ops: int, max_seconds: float | None = None
) -> Load:
    """``ops`` admissions through the ledger by ``writers`` concurrent writers."""
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
    return await closed_loop(writers, ops, admit, max_seconds)


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


async def run_target(target: Target, sizes: Sizes, console: Console) -> list[Cell]:
    """Every (fleet, writers) cell of one backend, ledger and ceiling."""
    cells = []
    for fleet in sizes.fleets:
        async with (
            fresh_database(target) as url,
            open_ledger(target, url, pool_size=max(sizes.writers)) as ledger,
        ):
            with console.status(f"{target.label}: seeding {fleet:,} nodes"):
                names = await seed_nodes(ledger, fleet)
            script = await capture_admission(target, url, names[0])
            for writers in sizes.writers:
                label = f"{target.label}, {fleet:,} nodes, {writers} writer(s)"
                await reset(ledger)
                with console.status(f"{label}: ledger"):
                    load = await ledger_cell(
                        ledger, names, writers, sizes.admission_ops, sizes.cell_seconds
                    )
                cells.append(
                    Cell(target.label, fleet, writers, "ledger", load, await check(ledger))
                )
                await reset(ledger)
                with console.status(f"{label}: raw driver"):
                    load = await ceiling_cell(
                        target, url, script, names, writers, sizes.admission_ops, sizes.cell_seconds
                    )
                cells.append(
                    Cell(target.label, fleet, writers, "ceiling", load, await check(ledger))
                )
                console.print(f"  {_line(cells[-2])}  |  ceiling {_line(cells[-1])}")
    return cells


def _line(cell: Cell) -> str:
    return (
        f"{cell.backend} {cell.fleet:,}n {cell.writers}w {cell.path}: "
        f"{rate(cell.load.throughput)}/s p50 {cell.load.p(0.5):.2f} ms "
        f"p99 {cell.load.p(0.99):.2f} ms check {cell.check.summary()}"
    )


def _outcomes(load: Load) -> str:
    refused, errors = load.count("refused"), load.count("error")
    return "" if not (refused or errors) else f" ({refused} refused, {errors} errors)"


def ratio(cells: list[Cell], backend: str) -> list[float]:
    """fleetgate/ceiling throughput for every (fleet, writers) of ``backend``."""
    out = []
    by_key = {(c.fleet, c.writers, c.path): c for c in cells if c.backend == backend}
    for (fleet, writers, path), cell in by_key.items():
        ceiling = by_key.get((fleet, writers, "ceiling"))
        if path == "ledger" and ceiling is not None and ceiling.load.throughput > 0:
            out.append(cell.load.throughput / ceiling.load.throughput)
    return out


def table(cells: list[Cell]) -> Table:
    """Ledger beside ceiling, one row per backend, fleet size and writers."""
    t = Table(
        "Admission at the ledger vs. the raw-driver ceiling",
        [
            "backend",
            "nodes",
            "writers",
            "ledger adm/s",
            "p50 ms",
            "p99 ms",
            "ceiling adm/s",
            "p50 ms",
            "p99 ms",
            "ledger/ceiling",
            "client CPU ms/op (ledger; ceiling)",
            "over-commit check (ledger; ceiling)",
        ],
    )
    by_key = {(c.backend, c.fleet, c.writers, c.path): c for c in cells}
    for (backend, fleet, writers, path), cell in by_key.items():
        if path != "ledger":
            continue
        ceiling = by_key.get((backend, fleet, writers, "ceiling"))
        row: list[object] = [
            backend,
            f"{fleet:,}",
            writers,
            rate(cell.load.throughput) + _outcomes(cell.load),
            ms(cell.load.p(0.5) / 1000),
            ms(cell.load.p(0.99) / 1000),
        ]
        if ceiling is None:
            row += ["-", "-", "-", "-", f"{cell.load.cpu_ms_per_op:.2f}", cell.check.summary()]
        else:
            share = cell.load.throughput / ceiling.load.throughput if ceiling.load.ops else 0.0
            row += [
                rate(ceiling.load.throughput) + _outcomes(ceiling.load),
                ms(ceiling.load.p(0.5) / 1000),
                ms(ceiling.load.p(0.99) / 1000),
                f"{share:.2f}",
                f"{cell.load.cpu_ms_per_op:.2f}; {ceiling.load.cpu_ms_per_op:.2f}",
                f"{cell.check.summary()} ({cell.check.placements:,} placements); "
                f"{ceiling.check.summary()}",
            ]
        t.add(*row)
    return t
