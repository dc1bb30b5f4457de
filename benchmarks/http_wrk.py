"""Admission over HTTP driven by ``wrk``: server CPU per placement, at the server's own limit.

Each backend gets a fresh database of ``FLEET`` nodes and, for one and two API worker processes,
8 and 32 connections, two cells: placements without a ``request_id`` (the baseline) and with a
unique one each (what a retrying scheduler sends), measured in the same run. A last cell per
backend fills every node to its limit first, so every request is refused (507): what a full
fleet costs. Every cell reports the server's CPU from ``/proc`` (all its processes), the share of
the machine that was busy and its load average, and ends with the over-commit check.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from rich.console import Console
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from benchmarks import wrk
from benchmarks.admission import NAMESPACE
from benchmarks.http import TOKEN, Server, machine_busy, serve, server_cpu
from benchmarks.invariants import Check, check
from benchmarks.report import Table, Verdict, rate
from benchmarks.seed import SIZE, open_ledger, reset, seed_nodes
from benchmarks.sizes import Sizes
from benchmarks.targets import Target, fresh_database
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.domain.capacity.model import AdmitRequest

INTRO = (
    "The real `fleetgate api` (uvicorn, 1 or 2 worker processes, a fresh server per cell) driven"
    " by `wrk` (C, 2 threads) with a Lua script: each request a `POST …/placements` of 1 vCPU,"
    " with a unique `request_id` or none. Server CPU is the user + system time of the server's"
    " processes from `/proc` over the measured run, divided by the placements it made (201s; on"
    " the full fleet, by the 507s it answered). Machine busy is the share of both cores busy"
    " during the run (wrk and every other process included); load is the 1-minute load average"
    " at the cell's end. Sessions opened counts the database sessions opened during the measured"
    " run, read before and after it on one held connection (PostgreSQL: this cell's database,"
    " from its statistics, which each session reports lazily, so within one either way; MariaDB:"
    " server-wide, so on an idle machine): about 0 means the pool kept its connections, no"
    " churn. The over-commit check runs after every cell."
)
FLEET = 100
#: Reads how many sessions the database server has opened so far (None: SQLite has none).
Counter = Callable[[], Awaitable[int | None]]
#: The nodes of the full-fleet cell: each filled to its limit by one placement.
FULL_FLEET = 20
CONNECTIONS = (8, 32)
PROCESSES = (1, 2)
PATH = f"/v1/namespaces/{NAMESPACE}/placements"
#: Targets (issue 30 item 4 and item 1, item 3).
CPU_MS_WITH_ID = 1.0
PLACEMENTS_TWO_WORKERS = 1000.0
ID_RATIO = 1.1
FULL_RATIO = 3.0


@dataclass
class WrkCell:
    """One wrk run against a fresh server: what it did, what the server spent, the check."""

    backend: str
    processes: int
    connections: int
    request_ids: bool
    full: bool
    run: wrk.WrkRun
    server_cpu_s: float
    machine_busy: float
    load: float
    check: Check
    #: Database sessions opened during the measured run (None: SQLite, which has none).
    sessions: int | None = None

    @property
    def placed(self) -> int:
        """Responses 201."""
        return self.run.count(201)

    @property
    def per_second(self) -> float:
        """Placements (201) per second (the full cell: requests answered per second)."""
        done = self.run.requests if self.full else self.placed
        return done / self.run.seconds if self.run.seconds > 0 else 0.0

    @property
    def cpu_ms(self) -> float:
        """Server CPU per placement (the full cell: per refused request)."""
        done = self.run.count(507) if self.full else self.placed
        return self.server_cpu_s * 1000.0 / done if done else float("inf")


def _matrix(sizes: Sizes) -> tuple[tuple[int, ...], tuple[int, ...], float]:
    if sizes.name == "tiny":  # the smoke test: one cell of each kind, briefly
        return (1,), (8,), 1.0
    return PROCESSES, CONNECTIONS, sizes.cell_seconds


@asynccontextmanager
async def session_counter(target: Target, url: str) -> AsyncIterator[Counter]:
    """A way to read the sessions the database server has opened so far (None for SQLite).

    PostgreSQL counts them per database (``pg_stat_database.sessions``, this cell's own
    database), MariaDB only server-wide (``Connections``, so anything else connecting meanwhile
    counts too). Both are read on one connection held for the whole cell, which adds none.
    """
    if target.kind == "sqlite":

        async def nothing() -> int | None:
            return None

        yield nothing
        return
    query = text(
        "SELECT sessions FROM pg_stat_database WHERE datname = current_database()"
        if target.kind == "postgres"
        else "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS"
        " WHERE VARIABLE_NAME = 'CONNECTIONS'"
    )
    engine = create_async_engine(url, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:

            async def count() -> int | None:
                return int((await conn.execute(query)).scalar_one())

            yield count
    finally:
        await engine.dispose()


async def _cell(
    server: Server,
    connections: int,
    seconds: float,
    request_ids: str | None,
    sessions: Counter,
) -> tuple[wrk.WrkRun, float, float, int | None]:
    # A short warm-up on the same server (its connections, its snapshot), then the measurement.
    warm = None if request_ids is None else request_ids + "-warm"
    wrk.run(server.base, PATH, TOKEN, SIZE.as_dict(), connections=connections, seconds=1,
            request_ids=warm)  # fmt: skip
    opened_before = await sessions()
    cpu_before, (busy_before, all_before) = server_cpu(server.pid), machine_busy()
    measured = wrk.run(
        server.base, PATH, TOKEN, SIZE.as_dict(),
        connections=connections, seconds=seconds, request_ids=request_ids,
    )  # fmt: skip
    cpu_after, (busy_after, all_after) = server_cpu(server.pid), machine_busy()
    opened_after = await sessions()
    spent = all_after - all_before
    busy = (busy_after - busy_before) / spent if spent else 0.0
    # The second count's own session is in it: not the server's.
    opened = (
        None if opened_after is None or opened_before is None else opened_after - opened_before - 1
    )
    return measured, cpu_after - cpu_before, busy, opened


async def fill(ledger: SqlLedger) -> None:
    """Charge every node to its limit: one placement each of exactly its room."""
    for node in await ledger.nodes():
        room = node.limits.minus_floored(node.used)
        made = await ledger.admit(
            AdmitRequest(NAMESPACE, node.name, room, demand=0.0, target_load=0.0)
        )
        if made.placement is None:
            raise RuntimeError(f"could not fill {node.name}: {made.denial}")


async def run_target(target: Target, sizes: Sizes, console: Console) -> list[WrkCell]:
    """Every cell of one backend, each against a freshly started server."""
    processes, connections, seconds = _matrix(sizes)
    cells: list[WrkCell] = []

    async def one(ledger: SqlLedger, url: str, n: int, c: int, ids: bool, full: bool) -> None:
        label = f"{target.label}, {n} worker(s), {c} connections" + (
            ", full fleet" if full else (", request_id" if ids else "")
        )
        with console.status(label):
            async with serve(target, url, n) as server, session_counter(target, url) as sessions:
                prefix = f"{os.getpid()}-{len(cells)}" if ids else None
                run, cpu, busy, opened = await _cell(server, c, seconds, prefix, sessions)
        cell = WrkCell(
            target.label, n, c, ids, full, run, cpu, busy, os.getloadavg()[0], await check(ledger),
            opened,
        )  # fmt: skip
        cells.append(cell)
        console.print(
            f"  {label}: {rate(cell.per_second)}/s p50 {run.p50_ms:.1f} ms "
            f"p99 {run.p99_ms:.1f} ms server CPU {cell.cpu_ms:.2f} ms sessions {opened} "
            f"statuses {run.statuses} check {cell.check.summary()}"
        )

    async with fresh_database(target) as url, open_ledger(target, url) as ledger:
        await seed_nodes(ledger, FLEET)
        for n in processes:
            for c in connections:
                for ids in (False, True):
                    await reset(ledger)
                    await one(ledger, url, n, c, ids, False)
    async with fresh_database(target) as url, open_ledger(target, url) as ledger:
        await seed_nodes(ledger, FULL_FLEET)
        await fill(ledger)
        await one(ledger, url, processes[0], connections[-1], True, True)
    return cells


def table(cells: list[WrkCell]) -> Table:
    """One row per cell."""
    t = Table(
        f"Admission over HTTP driven by wrk ({FLEET} nodes; full fleet: {FULL_FLEET} nodes, "
        "every one at its limit)",
        [
            "backend",
            "workers",
            "connections",
            "request_id",
            "placements/s",
            "p50 ms",
            "p99 ms",
            "server CPU ms/placement",
            "statuses",
            "sessions opened",
            "machine busy",
            "load (1 min)",
            "over-commit check",
        ],
    )
    for c in cells:
        statuses = ", ".join(f"{k}: {v:,}" for k, v in sorted(c.run.statuses.items()))
        t.add(
            c.backend,
            c.processes,
            c.connections,
            _kind(c),
            rate(c.per_second),
            f"{c.run.p50_ms:.1f}",
            f"{c.run.p99_ms:.1f}",
            f"{c.cpu_ms:.2f}",
            statuses + (f", socket errors: {c.run.errors}" if c.run.errors else ""),
            "—" if c.sessions is None else f"{c.sessions:,}",
            f"{c.machine_busy:.0%}",
            f"{c.load:.1f}",
            f"{c.check.summary()} ({c.check.placements:,} placements)",
        )
    return t


def _kind(cell: WrkCell) -> str:
    if cell.full:
        return "unique; full fleet (507/s, CPU per 507)"
    return "unique" if cell.request_ids else "none"


def _twin(cells: list[WrkCell], cell: WrkCell, ids: bool) -> WrkCell | None:
    return next(
        (
            c
            for c in cells
            if not c.full
            and (c.backend, c.processes, c.connections, c.request_ids)
            == (cell.backend, cell.processes, cell.connections, ids)
        ),
        None,
    )


def verdicts(cells: list[WrkCell]) -> list[Verdict]:
    """The issue's targets, read from this run's cells."""
    out: list[Verdict] = []
    pg = [c for c in cells if c.backend == "PostgreSQL" and c.request_ids and not c.full]
    if pg:
        best = min(pg, key=lambda c: c.cpu_ms)
        out.append(
            Verdict(
                f"<= {CPU_MS_WITH_ID} ms server CPU per placement with a request_id (PostgreSQL)",
                f"{best.cpu_ms:.2f} ms ({best.processes} worker(s), {best.connections} conns)",
                best.cpu_ms <= CPU_MS_WITH_ID,
                f"machine {best.machine_busy:.0%} busy, load {best.load:.1f}",
            )
        )
    two = [c for c in cells if c.processes == 2 and not c.full]
    if two:
        top = max(two, key=lambda c: c.per_second)
        out.append(
            Verdict(
                f">= {PLACEMENTS_TWO_WORKERS:,.0f} placements/s over HTTP with two workers",
                f"best {rate(top.per_second)}/s ({top.backend}, {top.connections} conns)",
                top.per_second >= PLACEMENTS_TWO_WORKERS,
                f"machine {top.machine_busy:.0%} busy, load {top.load:.1f}",
            )
        )
    ratios = [
        (c, base)
        for c in cells
        if c.request_ids and not c.full and (base := _twin(cells, c, False)) is not None
    ]
    if ratios:
        worst = max(ratios, key=lambda p: p[0].cpu_ms / p[1].cpu_ms)
        ratio = worst[0].cpu_ms / worst[1].cpu_ms
        median = sorted(c.cpu_ms / b.cpu_ms for c, b in ratios)[len(ratios) // 2]
        out.append(
            Verdict(
                f"a placement with a request_id <= {ID_RATIO}x the server CPU of one without",
                f"median {median:.2f}x, worst {ratio:.2f}x ({worst[0].backend}, "
                f"{worst[0].processes} worker(s), {worst[0].connections} conns)",
                median <= ID_RATIO,
                "same server build, same run, cells side by side",
            )
        )
    for full in (c for c in cells if c.full):
        base = _twin(cells, full, True)
        if base is None:
            continue
        ratio = full.cpu_ms / base.cpu_ms
        out.append(
            Verdict(
                f"a 507 on a full fleet <= {FULL_RATIO:.0f}x an admission's server CPU "
                f"({full.backend})",
                f"{full.cpu_ms:.2f} ms per 507 vs {base.cpu_ms:.2f} ms per admission: {ratio:.2f}x",
                ratio <= FULL_RATIO,
                f"{FULL_FLEET} full nodes, {full.connections} conns",
            )
        )
    return out
