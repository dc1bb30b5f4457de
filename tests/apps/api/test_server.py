"""``fleetgate api`` for real: a subprocess serving HTTP on a free port, over a SQLite file."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from fleetgate.apps.api.server import (
    EXIT_FAILED,
    EXIT_INVALID,
    cheap_access_log,
    fast_http,
    fast_loop,
    run_api,
    with_admin_token,
)
from fleetgate.apps.settings import ApiSettings, Settings
from tests.servers import FLEETGATE, free_port, stop, wait_until_serving
from tests.waiting import HANG_SECONDS

ADMIN_TOKEN = "real-server-admin-token"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """A running ``fleetgate api`` over a fresh SQLite file, with a known admin token."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETGATE_")}
    env["FLEETGATE_DATABASE_URL"] = f"sqlite+aiosqlite:///{tmp_path / 'api.db'}"
    env["FLEETGATE_API__ADMIN_TOKEN"] = ADMIN_TOKEN
    proc = subprocess.Popen(
        [str(FLEETGATE), "api", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(base, proc)
        yield base, proc
    finally:
        stop(proc)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        proc.stderr.close()


def test_the_real_server_serves_a_session_and_stops_cleanly(
    server: tuple[str, subprocess.Popen[str]],
) -> None:
    base, proc = server
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    with httpx.Client(base_url=base, timeout=10) as http:
        assert http.get("/healthz").json() == {"status": "ok"}
        assert http.get("/v1/nodes").status_code == 401
        put = http.put(
            "/v1/nodes/hv-1", json={"threads": 2, "memory_mb": 4096, "disk_gb": 50}, headers=admin
        )
        assert put.status_code == 201
        secret = http.post("/v1/admin/namespaces/ci/tokens", headers=admin).json()["secret"]
        team = {"Authorization": f"Bearer {secret}"}
        placed = http.post(
            "/v1/namespaces/ci/placements",
            json={"cpus": 4, "memory_mb": 1024, "disk_gb": 10},
            headers=team,
        )
        assert placed.status_code == 201, placed.text
        refused = http.post(
            "/v1/namespaces/ci/placements",
            json={"cpus": 4, "memory_mb": 1024, "disk_gb": 10},
            headers=team,
        )
        assert refused.status_code == 507 and refused.json()["error"] == "insufficient_capacity"
        assert (
            http.delete(
                f"/v1/namespaces/ci/placements/{placed.json()['id']}", headers=team
            ).status_code
            == 204
        )
        assert "openapi" in http.get("/openapi.json").json()
        assert http.get("/docs").status_code == 200
    proc.send_signal(signal.SIGTERM)  # what Kubernetes sends
    assert proc.wait(timeout=15) == 0


def test_without_a_configured_token_one_is_generated_and_printed_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    served: list[str | None] = []

    async def serve_nothing(self: uvicorn.Server, sockets: object = None) -> None:
        # Stands in for serving: record the token the app was built with, start nothing.
        served.append(self.config.app.state.authenticator._admin_token)

    monkeypatch.setattr(uvicorn.Server, "serve", serve_nothing)
    monkeypatch.delenv("FLEETGATE_API__ADMIN_TOKEN", raising=False)
    monkeypatch.setenv("FLEETGATE_DATABASE_URL", f"sqlite+aiosqlite:///{tmp_path / 'g.db'}")
    assert run_api("127.0.0.1", 0) == EXIT_FAILED  # nothing was started
    err = capsys.readouterr().err
    token = err.split("generated one for this run:\n", 1)[1].splitlines()[0].strip()
    assert served == [token] and len(token) >= 40 and err.count(token) == 1


def test_an_invalid_configuration_exits_2_naming_the_field(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FLEETGATE_API__PORT", "99999")
    assert run_api(None, None) == EXIT_INVALID
    assert "api.port" in capsys.readouterr().err


def test_with_admin_token_keeps_a_configured_token_and_generates_otherwise() -> None:
    configured = Settings(api=ApiSettings(admin_token="mine"))
    assert with_admin_token(configured) == (configured, None)
    generated, token = with_admin_token(Settings())
    assert token is not None and generated.api.admin_token == token
    assert with_admin_token(Settings())[1] != token


def test_workers_share_the_generated_admin_token(tmp_path: Path) -> None:
    # Every worker builds its own app: each must accept the one token the parent printed.
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETGATE_")}
    env["FLEETGATE_DATABASE_URL"] = f"sqlite+aiosqlite:///{tmp_path / 'workers.db'}"
    proc = subprocess.Popen(
        [str(FLEETGATE), "api", "--host", "127.0.0.1", "--port", str(port), "--workers", "2"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    assert proc.stderr is not None
    try:
        first = proc.stderr.readline() + proc.stderr.readline()
        token = first.split("generated one for this run:\n", 1)[1].strip()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        admin = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base, timeout=10) as http:
            assert {http.get("/v1/nodes", headers=admin).status_code for _ in range(20)} == {200}
            assert http.get("/v1/nodes", headers={"Authorization": "Bearer x"}).status_code == 401
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(timeout=30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stderr.close()


def test_the_workers_socket_says_it_is_tcp() -> None:
    # asyncio sets TCP_NODELAY only on sockets whose protocol is TCP; without it every kept-alive
    # response waited for a delayed ACK (about 40 ms per request with --workers).
    from fleetgate.apps.api.server import _listening_socket

    with _listening_socket("127.0.0.1", 0) as sock:
        assert sock.proto == socket.IPPROTO_TCP and sock.get_inheritable()


def test_the_server_serves_on_uvloop_and_httptools() -> None:
    # Both are declared dependencies of the apps distribution, so both are installed here.
    assert (fast_loop(), fast_http()) == ("uvloop", "httptools")


def test_the_access_log_is_one_plain_line_off_the_structured_chain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    access = logging.getLogger("uvicorn.access")
    saved = (access.handlers[:], access.propagate)
    try:
        cheap_access_log()
        assert not access.propagate and len(access.handlers) == 1
        assert isinstance(access.handlers[0], logging.StreamHandler)
        stream = io.StringIO()
        monkeypatch.setattr(sys, "stderr", stream)  # the handler writes to the current stderr
        access.setLevel(logging.INFO)
        access.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:5", "POST", "/v1/x", "1.1", 201)
        line = stream.getvalue()
        assert line.endswith(' access 127.0.0.1:5 - "POST /v1/x HTTP/1.1" 201\n')
    finally:
        access.handlers[:], access.propagate = saved
        access.setLevel(logging.NOTSET)


def _listening(port: int) -> int:
    return sum(
        1
        for table in ("/proc/net/tcp", "/proc/net/tcp6")
        if Path(table).exists()
        for line in Path(table).read_text().splitlines()[1:]
        if line.split()[3] == "0A" and int(line.split()[1].rsplit(":", 1)[1], 16) == port
    )


def _connections_per_process(parent: int, port: int) -> dict[int, int]:
    """Established connections to ``port`` each child of ``parent`` holds (Linux ``/proc``)."""
    accepted = {
        fields[9]
        for table in ("/proc/net/tcp", "/proc/net/tcp6")
        if Path(table).exists()
        for fields in (line.split() for line in Path(table).read_text().splitlines()[1:])
        if fields[3] == "01" and int(fields[1].rsplit(":", 1)[1], 16) == port
    }
    children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    held: dict[int, int] = {}
    for pid in children:
        count = 0
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                link = os.readlink(fd)
                count += link.startswith("socket:[") and link[8:-1] in accepted
        held[int(pid)] = count
    return held


def test_workers_listen_on_sockets_of_their_own_and_share_the_connections(
    tmp_path: Path,
) -> None:
    # With one shared socket the kernel gave a burst of new connections to whichever worker
    # accepted first, often all of them; each worker's own SO_REUSEPORT socket spreads them.
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETGATE_")}
    env["FLEETGATE_DATABASE_URL"] = f"sqlite+aiosqlite:///{tmp_path / 'spread.db'}"
    env["FLEETGATE_API__ADMIN_TOKEN"] = "spread-admin-token"
    proc = subprocess.Popen(
        [str(FLEETGATE), "api", "--host", "127.0.0.1", "--port", str(port), "--workers", "2"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    clients: list[socket.socket] = []
    try:
        deadline = time.monotonic() + HANG_SECONDS
        while _listening(port) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, "workers never listened"
            time.sleep(0.2)
        for _ in range(32):
            client = socket.create_connection(("127.0.0.1", port), timeout=HANG_SECONDS)
            client.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert client.recv(12).startswith(b"HTTP/1.1 200")
            clients.append(client)
        held = _connections_per_process(proc.pid, port)
        # 32 connections hashed by address onto two sockets: all on one is a 1 in 2**31 draw.
        assert sum(held.values()) == 32, held
        assert sum(1 for n in held.values() if n > 0) == 2, held
    finally:
        for client in clients:
            client.close()
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(timeout=HANG_SECONDS) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
