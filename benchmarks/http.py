"""Admission over HTTP: the real ``fleetgate api`` (uvicorn on 127.0.0.1), driven by httpx.

The server is the product's own command in a separate process, configured by environment
variables as an operator would, over a database the benchmark seeded. Each request is a
``POST /v1/namespaces/{ns}/placements`` with the admin token: the full path of ranking, the
walk, the guarded transaction and the audit events.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from rich.console import Console

from benchmarks.admission import NAMESPACE, Cell
from benchmarks.invariants import Check, check
from benchmarks.report import Table, ms, rate
from benchmarks.seed import SIZE, open_ledger, reset, seed_nodes
from benchmarks.sizes import Sizes
from benchmarks.stats import closed_loop
from benchmarks.targets import Target, fresh_database

TOKEN = "bench-admin-token-0123456789abcdef"
STARTUP_SECONDS = 60.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: Set to a directory to run each API server under cProfile, one ``.prof`` file per server.
PROFILE_ENV = "FLEETGATE_BENCH_PROFILE_DIR"
#: ``fleetgate api --workers`` for the servers (1 unless set); the table says which was used.
WORKERS_ENV = "FLEETGATE_BENCH_API_WORKERS"


def workers() -> int:
    """How many uvicorn worker processes each API server runs."""
    return max(1, int(os.environ.get(WORKERS_ENV, "1")))


def _command(port: int, processes: int | None = None) -> list[str]:
    script = Path(sys.executable).with_name("fleetgate")
    n = workers() if processes is None else processes
    args = ["api", "--host", "127.0.0.1", "--port", str(port), "--workers", str(n)]
    profile_dir = os.environ.get(PROFILE_ENV)
    if profile_dir and script.exists():
        # Only the parent process is profiled: run with one worker to profile the serving.
        out = Path(profile_dir) / f"api-{port}.prof"
        return [sys.executable, "-m", "cProfile", "-o", str(out), str(script), *args]
    if script.exists():
        return [str(script), *args]
    code = "from fleetgate.apps.cli import main; main()"
    return [sys.executable, "-c", code, *args]


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (uvicorn workers are children of the supervisor)."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        for children in Path(f"/proc/{p}/task").glob("*/children"):
            try:
                todo += [int(c) for c in children.read_text().split()]
            except OSError:
                continue
    return found


def server_cpu(pid: int) -> float:
    """CPU seconds (user + system) the API server's processes have used (Linux /proc)."""
    total = 0
    for p in _tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / _TICK


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, from /proc/stat."""
    try:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except OSError:
        return 0.0, 0.0
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return (sum(values) - idle) / _TICK, sum(values) / _TICK


@dataclass
class Server:
    """A running ``fleetgate api``: where it listens, and its process (for its CPU time)."""

    base: str
    pid: int


@asynccontextmanager
async def serve(target: Target, url: str, processes: int | None = None) -> AsyncIterator[Server]:
    """Run ``fleetgate api`` on ``url`` (``processes`` workers) until the block ends."""
    port = _free_port()
    env = {
        **os.environ,
        "FLEETGATE_DATABASE_URL": url,
        "FLEETGATE_DATABASE_SESSION_VARIABLES": json.dumps(target.session_variables),
        "FLEETGATE_API__ADMIN_TOKEN": TOKEN,
        "FLEETGATE_LOG_FORMAT": "json",
    }
    env.pop("FLEETGATE_CONFIG", None)
    process = subprocess.Popen(  # noqa: ASYNC220 - started once, before any measurement
        _command(port, processes), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    base = f"http://127.0.0.1:{port}"
    try:
        await _wait_ready(base, process)
        yield Server(base, process.pid)
    finally:
        # No graceful drain: requests a capped cell abandoned are not worth serving.
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def _wait_ready(base: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    async with httpx.AsyncClient(base_url=base) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"fleetgate api exited with {process.returncode}")
            try:
                if (await client.get("/readyz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.2)
    raise RuntimeError("fleetgate api did not become ready")


@dataclass
class HttpCell:
    """An HTTP cell with the CPU the server and the whole machine spent on it."""

    cell: Cell
    server_cpu_ms_per_op: float
    machine_busy: float  # share of all cores busy while the cell ran (0..1)


async def http_cell(
    server: Server, writers: int, ops: int, max_seconds: float | None = None
) -> HttpCell:
    """``ops`` placements over HTTP by ``writers`` concurrent clients (no check: the caller's)."""
    base = server.base
    limits = httpx.Limits(max_connections=writers, max_keepalive_connections=writers)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    body = SIZE.as_dict()
    path = f"/v1/namespaces/{NAMESPACE}/placements"
    timeout = 60.0 if max_seconds is None else max(10.0, 3 * max_seconds)
    async with httpx.AsyncClient(
        base_url=base, limits=limits, headers=headers, timeout=timeout
    ) as client:

        async def place(_: int, __: int) -> str:
            try:
                r = await client.post(path, json=body)
            except httpx.HTTPError:
                return "error"
            if r.status_code == 201:
                return "admitted"
            return "refused" if r.status_code == 507 else "error"

        warmup = None if max_seconds is None else max_seconds / 4
        await closed_loop(writers, min(64, writers * 4), place, warmup)
        cpu_before, (busy_before, all_before) = server_cpu(server.pid), machine_busy()
        load = await closed_loop(writers, ops, place, max_seconds)
        cpu_after, (busy_after, all_after) = server_cpu(server.pid), machine_busy()
    spent = all_after - all_before
    return HttpCell(
        Cell("", 0, writers, "http", load, Check()),
        (cpu_after - cpu_before) * 1000.0 / load.ops if load.ops else 0.0,
        (busy_after - busy_before) / spent if spent > 0 else 0.0,
    )


#: Above this many nodes a placement over HTTP takes on the order of a second, so only the
#: lighter concurrencies are measured (more writers would only queue behind one core).
LARGE_FLEET = 1_000


async def run_target(target: Target, sizes: Sizes, console: Console) -> list[HttpCell]:
    """Every (fleet, writers) HTTP cell of one backend, each against a freshly started server.

    A fresh server per cell: requests a slow cell abandoned at its cap must not be served on
    the next cell's time.
    """
    cells = []
    for fleet in sizes.fleets:
        async with fresh_database(target) as url, open_ledger(target, url) as ledger:
            with console.status(f"{target.label}: seeding {fleet:,} nodes"):
                await seed_nodes(ledger, fleet)
            writer_counts = [w for w in sizes.writers if fleet <= LARGE_FLEET or w <= 8]
            for writers in writer_counts:
                await reset(ledger)
                label = f"{target.label}, {fleet:,} nodes, {writers} writer(s): HTTP"
                with console.status(label):
                    async with serve(target, url) as server:
                        measured = await http_cell(
                            server, writers, sizes.http_ops, sizes.cell_seconds
                        )
                cell = measured.cell
                cell.backend, cell.fleet = target.label, fleet
                cell.check = await check(ledger)
                cells.append(measured)
                console.print(
                    f"  {label}: {cell.load.throughput:,.0f}/s "
                    f"p50 {cell.load.p(0.5):.1f} ms p99 {cell.load.p(0.99):.1f} ms "
                    f"check {cell.check.summary()}"
                )
    return cells


def _processes() -> str:
    n = workers()
    return "one process" if n == 1 else f"--workers {n}"


def table(measured: list[HttpCell]) -> Table:
    """One row per backend, fleet size and writers."""
    t = Table(
        f"Admission over HTTP (fleetgate api, uvicorn, {_processes()}; httpx client)",
        [
            "backend",
            "nodes",
            "writers",
            "placements/s",
            "p50 ms",
            "p99 ms",
            "client CPU ms/op",
            "server CPU ms/op",
            "machine busy",
            "over-commit check",
        ],
    )
    for m in measured:
        c = m.cell
        extra = c.load.count("refused") + c.load.count("error")
        t.add(
            c.backend,
            f"{c.fleet:,}",
            c.writers,
            rate(c.load.throughput) + (f" ({extra} not admitted)" if extra else ""),
            ms(c.load.p(0.5) / 1000),
            ms(c.load.p(0.99) / 1000),
            f"{c.load.cpu_ms_per_op:.2f}",
            f"{m.server_cpu_ms_per_op:.2f}",
            f"{m.machine_busy:.0%}",
            f"{c.check.summary()} ({c.check.placements:,} placements)",
        )
    return t
