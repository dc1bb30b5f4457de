"""The real ``fleetgate api`` (uvicorn on 127.0.0.1) for the HTTP benchmark, and its CPU time.

The server is the product's own command in a separate process, configured by environment
variables as an operator would, over a database the benchmark seeded. ``http_wrk`` drives it
with ``wrk``: each request a ``POST /v1/namespaces/{ns}/placements`` with the admin token, the
full path of ranking, the walk, the guarded transaction and the audit events.
"""

from __future__ import annotations

import asyncio
import inspect
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
import uvicorn

from benchmarks.targets import Target

TOKEN = "bench-admin-token-0123456789abcdef"
STARTUP_SECONDS = 60.0
#: How long ``fleetgate api`` keeps an idle connection open: uvicorn's default, which it keeps.
SERVER_KEEP_ALIVE = float(
    inspect.signature(uvicorn.Config).parameters["timeout_keep_alive"].default
)
#: How long a benchmark client keeps an idle pooled connection: well under the server's. The
#: server may close an idle connection at any time (RFC 9112 § 9.5); httpx's default (5 s) equals
#: uvicorn's, so a connection idle just under 5 s by the client's clock (which starts after the
#: server's) was reused as the server closed it: the request met a reset, ``httpx.ReadError``.
#: The margin covers the server's event loop running the close before it reads a request that
#: arrived while it was busy (uvloop runs due timers before it polls the sockets).
CLIENT_KEEP_ALIVE = SERVER_KEEP_ALIVE / 5


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
    code = "from fleetgate.apps.cli.main import main; main()"
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
async def serve(
    target: Target, url: str, processes: int | None = None, log: Path | None = None
) -> AsyncIterator[Server]:
    """Run ``fleetgate api`` on ``url`` (``processes`` workers) until the block ends.

    ``log``: a file for the server's log lines (default: discarded).
    """
    port = _free_port()
    env = {
        **os.environ,
        "FLEETGATE_DATABASE_URL": url,
        "FLEETGATE_DATABASE_SESSION_VARIABLES": json.dumps(target.session_variables),
        "FLEETGATE_API__ADMIN_TOKEN": TOKEN,
        "FLEETGATE_LOG_FORMAT": "json",
    }
    env.pop("FLEETGATE_CONFIG", None)
    handle = None if log is None else log.open("wb")
    output = subprocess.DEVNULL if handle is None else handle
    process = subprocess.Popen(  # noqa: ASYNC220 - started once, before any measurement
        _command(port, processes), env=env, stdout=output, stderr=output
    )
    base = f"http://127.0.0.1:{port}"
    try:
        await _wait_ready(base, process)
        await _wait_listening(port, processes or 1, process)
        yield Server(base, process.pid)
    finally:
        # No graceful drain: requests a capped cell abandoned are not worth serving.
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if handle is not None:
            handle.close()


def listening(port: int) -> int:
    """Sockets listening on ``port`` (Linux ``/proc/net/tcp*``): one per worker once all serve."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            count += state == "0A" and int(local.rsplit(":", 1)[1], 16) == port
    return count


async def _wait_listening(port: int, processes: int, process: subprocess.Popen[bytes]) -> None:
    # Ready is one worker's answer; each worker listens on a socket of its own, and the kernel
    # gives a connection only to a socket that listens: a cell started before every worker did
    # would measure fewer workers than it says.
    deadline = time.monotonic() + STARTUP_SECONDS
    while listening(port) < processes:
        if process.poll() is not None:
            raise RuntimeError(f"fleetgate api exited with {process.returncode}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"fewer than {processes} workers of fleetgate api listen")
        await asyncio.sleep(0.2)


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
