"""Real ``fleetgate api`` and ``fleetgate up`` processes for tests: start, wait until served, stop.

One home for what the server, client-CLI, metrics and offline-docs tests all need, so the way a
test starts and stops the real server (and how long it is willing to wait on a loaded machine)
is decided once.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

#: The console script installed next to the interpreter running the tests.
FLEETGATE = Path(sys.executable).with_name("fleetgate")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_until_serving(base: str, proc: subprocess.Popen[str], seconds: float = 30) -> None:
    """Return once ``base``/readyz answers 200; fail if the process exits or time runs out."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"fleetgate api exited with {proc.returncode}")
        try:
            if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    pytest.fail(f"fleetgate api did not become ready within {seconds:g} s")


def api_process(
    db: Path | str,
    port: int,
    *extra: str,
    token: str | None = None,
    environment: Mapping[str, str] | None = None,
) -> subprocess.Popen[str]:
    """``fleetgate api`` on 127.0.0.1:``port`` over the SQLite file ``db`` (or the database URL
    ``db``), with ``environment`` added to its settings; output discarded."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEETGATE_", "PROMETHEUS"))}
    env["FLEETGATE_DATABASE_URL"] = db if isinstance(db, str) else f"sqlite+aiosqlite:///{db}"
    env.update(environment or {})
    if token is not None:
        env["FLEETGATE_API__ADMIN_TOKEN"] = token
    return subprocess.Popen(
        [str(FLEETGATE), "api", "--host", "127.0.0.1", "--port", str(port), *extra],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def stop(proc: subprocess.Popen[str], sig: signal.Signals = signal.SIGINT) -> None:
    """Send ``sig`` to a still-running server and wait for it; kill it if it does not stop."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def running_api(
    db: Path | str,
    *extra: str,
    token: str,
    seconds: float = 120,
    environment: Mapping[str, str] | None = None,
) -> Iterator[str]:
    """A served ``fleetgate api`` over ``db`` for the block: its base URL; stopped afterwards.

    ``seconds`` is generous by default: on a loaded 2-core machine start-up can take a while.
    """
    port = free_port()
    proc = api_process(db, port, *extra, token=token, environment=environment)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(base, proc, seconds=seconds)
        yield base
    finally:
        stop(proc)


@contextmanager
def serving_in_thread(app: Any, seconds: float = 60) -> Iterator[str]:
    """``app`` under uvicorn on 127.0.0.1 in a thread of this process: its base URL for the
    block (for tests that shape the app's container, e.g. its fake cluster or database)."""
    import uvicorn

    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + seconds
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


UP_STARTUP = 180.0
"""Seconds ``fleetgate up`` may take to print its banner (the first run on a busy CI machine
compiles every module)."""
UP_LINK = re.compile(r"dashboard\s+(http://\S+/\?token=\S+)")


class UpProcess:
    """A running ``fleetgate up`` in ``cwd`` on ``port`` (0: any free one) whose output is read
    on threads, so that every wait can time out."""

    def __init__(self, cwd: Path, port: int = 0) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETGATE_")}
        self.process = subprocess.Popen(
            [str(FLEETGATE), "up", "--port", str(port)],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.stderr: list[str] = []
        self.pumps = [
            threading.Thread(target=self._pump, args=(self.process.stdout, self.lines.put)),
            threading.Thread(target=self._pump, args=(self.process.stderr, self.stderr.append)),
        ]
        for pump in self.pumps:
            pump.start()

    @staticmethod
    def _pump(stream: Any, sink: Callable[[str], None]) -> None:
        for line in stream:
            sink(line)

    def link(self) -> str:
        """The dashboard link ``fleetgate up`` prints once it serves."""
        deadline = time.monotonic() + UP_STARTUP
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"fleetgate up exited early: {''.join(self.stderr)[-2000:]}")
            try:
                line = self.lines.get(timeout=1.0)
            except queue.Empty:
                continue
            match = UP_LINK.search(line)
            if match:
                return match.group(1)
        pytest.fail(f"fleetgate up printed no dashboard link: {''.join(self.stderr)[-2000:]}")

    def interrupt(self) -> int:
        """Ctrl-C, and the exit code."""
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout=60)

    def close(self) -> None:
        """Kill it if it still runs; let the readers finish; close the pipes."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for pump in self.pumps:
            pump.join(timeout=10)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
