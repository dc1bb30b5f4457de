"""A real ``fleetgate api`` process for tests: start it, wait until it serves, stop it.

One home for what the server, client-CLI, metrics and offline-docs tests all need, so the way a
test starts and stops the real server (and how long it is willing to wait on a loaded machine)
is decided once.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
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
