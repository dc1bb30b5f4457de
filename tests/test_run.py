"""run.py, the README's entry point: a long command it starts stops when run.py's PID is signalled.

Runs the real ``python3 run.py up`` (which syncs the locked environment first), waits for the
dashboard link, sends SIGINT or SIGTERM to run.py's own PID, and checks that the exit status is 0
and that nothing serves the port any more (no orphaned ``fleetgate`` left behind).
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
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STARTUP = 240.0  # seconds: run.py syncs the environment, then `up` imports everything
SERVING = re.compile(r"dashboard\s+http://[^:/]+:(\d+)/")


def serves(port: int) -> bool:
    """Whether something accepts connections on the loopback port."""
    with socket.socket() as probe:
        probe.settimeout(2.0)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_to_run_py_stops_the_server_and_exits_0(sig: signal.Signals) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("FLEETGATE_") and k not in {"UV_PROJECT_ENVIRONMENT", "VIRTUAL_ENV"}
    }
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "run.py"), "up", "--port", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    seen: list[str] = []
    assert process.stdout is not None
    pump = threading.Thread(target=lambda: [lines.put(line) for line in process.stdout or ()])
    pump.start()
    try:
        port = None
        deadline = time.monotonic() + STARTUP
        while port is None and time.monotonic() < deadline and process.poll() is None:
            try:
                line = lines.get(timeout=1.0)
            except queue.Empty:
                continue
            seen.append(line)
            if match := SERVING.search(line):
                port = int(match.group(1))
        assert port is not None, "run.py up never served:\n" + "".join(seen)[-3000:]
        assert serves(port)

        process.send_signal(sig)
        status = process.wait(timeout=90)
        pump.join(timeout=30)
        while not lines.empty():
            seen.append(lines.get())
        assert status == 0, "".join(seen)[-3000:]
        # The server went with it: nobody is left listening on the port.
        deadline = time.monotonic() + 30
        while serves(port) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not serves(port), f"something still serves port {port} after run.py exited"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        pump.join(timeout=10)
        process.stdout.close()  # the pump has read it to the end
