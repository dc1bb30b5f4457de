"""The workers of ``fleetgate api --workers N``: uvicorn's public ``Server`` in processes of our
own, each on its own socket; a dead or hung worker is replaced on its socket, a worker that fails
before it serves stops the server (real processes, real sockets)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.apps.api.test_server import _listening
from tests.servers import FLEETGATE, free_port
from tests.waiting import HANG_SECONDS

_FAILING = """
import socket
from fleetgate.apps.api.workers import Workers
sock = socket.socket()
sock.bind(("127.0.0.1", 0))
sock.listen()
Workers({"app": "no_such_module_here:app", "log_config": None}, [sock]).run()
print("stopped")
"""


def test_a_worker_that_fails_before_it_serves_stops_the_server() -> None:
    # A replacement would fail the same way: the supervisor stops instead of looping.
    run = subprocess.run([sys.executable, "-c", _FAILING], capture_output=True, text=True,
                         timeout=HANG_SECONDS)  # fmt: skip
    assert run.returncode == 0 and run.stdout == "stopped\n", run.stderr
    assert "failed to start; stopping the server" in run.stderr


def _children(parent: int) -> set[int]:
    return {int(pid) for pid in Path(f"/proc/{parent}/task/{parent}/children").read_text().split()}


def _serving_workers(parent: int) -> set[int]:
    """The children of ``parent`` that run a worker (the spawn's resource tracker aside)."""
    return {
        pid
        for pid in _children(parent)
        if "multiprocessing.resource_tracker" not in Path(f"/proc/{pid}/cmdline").read_text()
    }


def _wait(predicate: Callable[[], bool], what: str) -> None:
    """Return once ``predicate()`` holds; fail as hung after HANG_SECONDS."""
    deadline = time.monotonic() + HANG_SECONDS
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


@pytest.mark.parametrize(
    ("blow", "said"),
    [
        (signal.SIGKILL, "died; starting another on its socket"),
        # A stopped process is alive but its loop never turns: a hung worker, as uvicorn's ping
        # would have found it; it is killed (it stops beating), then replaced like a dead one.
        (signal.SIGSTOP, "stopped answering; killing it"),
    ],
)
def test_a_dead_or_hung_worker_is_replaced_on_its_socket(
    tmp_path: Path, blow: signal.Signals, said: str
) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETGATE_")}
    env["FLEETGATE_DATABASE_URL"] = f"sqlite+aiosqlite:///{tmp_path / 'workers.db'}"
    env["FLEETGATE_API__ADMIN_TOKEN"] = "workers-admin-token"
    proc = subprocess.Popen(
        [str(FLEETGATE), "api", "--host", "127.0.0.1", "--port", str(port), "--workers", "2"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait(lambda: proc.poll() is None and _listening(port) == 2, "workers never listened")
        first = _serving_workers(proc.pid)
        assert len(first) == 2
        victim = min(first)
        os.kill(victim, blow)
        _wait(lambda: victim not in _serving_workers(proc.pid), "the dead worker stayed")
        _wait(lambda: len(_serving_workers(proc.pid)) == 2 and _listening(port) == 2,
              "no worker took the dead one's place")  # fmt: skip
        assert proc.poll() is None
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=HANG_SECONDS) as http:
            # New connections reach both sockets again (each is hashed onto one of them).
            assert {http.get("/healthz", headers={"Connection": "close"}).status_code
                    for _ in range(20)} == {200}  # fmt: skip
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(timeout=HANG_SECONDS) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            assert proc.stderr is not None
            log = proc.stderr.read()
            proc.stderr.close()
    assert f"worker {victim} {said}" in log
