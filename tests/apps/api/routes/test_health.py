"""Probes and metrics: unauthenticated; readiness follows the database."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import sqlite3
import subprocess
import time
from collections.abc import Awaitable
from pathlib import Path

import httpx
import pytest
from prometheus_client import Counter
from sqlalchemy import make_url

from fleetgate.apps.api.app import create_app
from fleetgate.apps.container import build_container
from fleetgate.apps.settings import (
    ApiSettings,
    DatabaseRetrySettings,
    DatabaseTimeoutSettings,
    Settings,
)
from tests.adapters.sql.test_engine import through, upstream
from tests.apps.api.conftest import ADMIN, Api, api_settings, running_api
from tests.backends import _admin, server_of
from tests.conftest import Backend
from tests.servers import FLEETGATE, free_port
from tests.waiting import HANG_SECONDS

# Nothing listens on port 1 of the loopback: connecting fails at once.
UNREACHABLE = "postgresql+asyncpg://nobody@127.0.0.1:1/fleetgate"


async def test_healthz_and_readyz_answer_without_a_token(api: Api) -> None:
    assert (await api.client.get("/healthz")).json() == {"status": "ok"}
    ready = await api.client.get("/readyz")
    assert (ready.status_code, ready.json()) == (200, {"status": "ready"})


async def test_readyz_is_503_while_the_database_does_not_answer_healthz_stays_200() -> None:
    container = build_container(
        Settings(database_url=UNREACHABLE, api=ApiSettings(admin_token="t"))
    )
    app = create_app(container)  # no lifespan: the ledger never connected
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://fleetgate") as client:
        ready = await client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["error"] == "unavailable"
        assert (await client.get("/healthz")).status_code == 200
        # An API call needing the database is a 503 in the error shape, never a 500.
        r = await client.get("/v1/nodes", headers={"Authorization": "Bearer t"})
        assert r.status_code == 503 and r.json()["error"] == "unavailable"
        # So is a namespace token that cannot be looked up: unknown is not the same as unverified.
        r = await client.get("/v1/events", headers={"Authorization": "Bearer fgt_x"})
        assert r.status_code == 503 and r.json()["error"] == "unavailable"
    await container.ledger().close()


async def test_metrics_serve_the_containers_registry(api: Api) -> None:
    probe = Counter(
        "fleetgate_test_probe",
        "A series only this test registers.",
        registry=api.container.metrics_registry(),
    )
    probe.inc(3)
    r = await api.client.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    assert "fleetgate_test_probe_total 3.0" in r.text


# --- a database that goes away while the API runs (issue 27 item 2) ---------------------------

#: Short bounds for the test; each answer must come within them plus a margin a busy machine
#: never needs (before, a dropped database was a 500 after 8 s, or no answer in 40 s).
SHORT = DatabaseTimeoutSettings(connect_seconds=1, pool_seconds=1, statement_seconds=1)
MARGIN = 10.0


async def timed(call: Awaitable[httpx.Response], bound: float) -> httpx.Response:
    started = time.monotonic()
    response = await asyncio.wait_for(call, bound + MARGIN)
    assert time.monotonic() - started < bound + MARGIN
    return response


def unavailable(r: httpx.Response) -> bool:
    return r.status_code == 503 and r.json()["error"] == "unavailable"


async def test_a_dropped_database_is_503_and_not_ready_then_served_when_back(
    backend: Backend,
) -> None:
    if backend.kind == "sqlite":
        pytest.skip("a server's database; SQLite's held lock is the next test")
    server = server_of(backend.kind)
    admin = server.admin_url(backend.url)
    name = f"fgt_api_gone_{os.getpid()}_{secrets.token_hex(3)}"
    own = Backend(make_url(backend.url).set(database=name).render_as_string(False), backend.kind)
    await _admin(admin, f"CREATE DATABASE {name}")
    try:
        async for api in running_api(api_settings(own, database_timeouts=SHORT)):
            await api.node("n1")
            place = {"cpus": 1, "memory_mb": 512, "disk_gb": 1}
            await _admin(admin, server.drop.format(name=name))
            for call in (
                api.client.get("/v1/nodes", headers=ADMIN),
                api.client.post("/v1/namespaces/t/placements", json=place, headers=ADMIN),
                api.client.get("/readyz"),
                api.client.get("/v1/nodes", headers=ADMIN),
            ):
                r = await timed(call, 2.0)
                assert unavailable(r), (r.status_code, r.text)
            await _admin(admin, f"CREATE DATABASE {name}")
            await api.container.ledger().migrate()  # restored (empty): no restart needed
            assert (await api.client.get("/readyz")).status_code == 200
            r = await api.client.get("/v1/nodes", headers=ADMIN)
            assert r.status_code == 200, r.text
            await api.node("n1")
            r = await api.client.post("/v1/namespaces/t/placements", json=place, headers=ADMIN)
            assert r.status_code == 201, r.text
    finally:
        await _admin(admin, server.drop.format(name=name))


async def test_a_sqlite_lock_held_elsewhere_is_503_within_the_busy_waits(
    backend: Backend, tmp_path: Path
) -> None:
    if backend.kind != "sqlite":
        pytest.skip("SQLite's own way to be unavailable")
    path = tmp_path / "api.db"
    own = Backend(f"sqlite+aiosqlite:///{path}", "sqlite")
    # Conflicts are retried for a time budget: a short one, so the 503 comes soon.
    retry = DatabaseRetrySettings(deadline_seconds=0.5)
    async for api in running_api(api_settings(own, database_timeouts=SHORT, database_retry=retry)):
        await api.node("n1")
        ledger = api.container.ledger()
        ledger.store.options["busy_timeout_ms"] = 200  # type: ignore[attr-defined]
        await ledger.store.dispose()  # type: ignore[attr-defined]
        place = {"cpus": 1, "memory_mb": 512, "disk_gb": 1}
        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("BEGIN EXCLUSIVE")
            bound = 0.5 + 0.2  # the retries' deadline, then the last busy wait
            r = await timed(
                api.client.post("/v1/namespaces/t/placements", json=place, headers=ADMIN), bound
            )
            assert unavailable(r), (r.status_code, r.text)
            # Reads go on (WAL): the database is there, so the API stays ready.
            assert (await api.client.get("/readyz")).status_code == 200
        finally:
            other.close()
        r = await api.client.post("/v1/namespaces/t/placements", json=place, headers=ADMIN)
        assert r.status_code == 201, r.text


async def test_a_silent_database_is_503_within_the_bound_logged_once_and_served_again(
    backend: Backend, tmp_path: Path
) -> None:
    """The real ``fleetgate api`` over a database that falls silent (issue 42 item 3): every
    path a 503 naming the wait within ``answer_seconds``, one WARNING line when it is lost and
    one INFO line when it is back, and served again without a restart."""
    if backend.kind == "sqlite":
        pytest.skip("a server's connections fall silent; a local file does not")
    proxy = upstream(backend.url)
    await proxy.start()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEETGATE_", "PROMETHEUS"))}
    env |= {
        "FLEETGATE_DATABASE_URL": through(backend.url, proxy),
        "FLEETGATE_API__ADMIN_TOKEN": "silent-admin-token",
        "FLEETGATE_DATABASE_TIMEOUTS__ANSWER_SECONDS": "1",
        "FLEETGATE_DATABASE_SESSION_VARIABLES": json.dumps(dict(backend.session_variables)),
    }
    log = tmp_path / "api.log"
    base = f"http://127.0.0.1:{port}"
    admin = {"Authorization": "Bearer silent-admin-token"}
    place = {"cpus": 1, "memory_mb": 512, "disk_gb": 1}
    with log.open("w") as sink:
        proc = await asyncio.create_subprocess_exec(
            str(FLEETGATE), "api", "--host", "127.0.0.1", "--port", str(port),
            env=env, stdout=sink, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        async with httpx.AsyncClient(base_url=base, timeout=60) as client:
            async with asyncio.timeout(HANG_SECONDS):  # a hang guard: start-up on a busy machine
                while True:
                    if await served(client, proc):
                        break
                    await asyncio.sleep(0.1)
            assert (await client.put("/v1/nodes/n1", json=NODE, headers=admin)).is_success
            proxy.silent = True
            for method, path, body, token in (
                ("GET", "/v1/nodes", None, admin),
                ("POST", "/v1/namespaces/t/placements", place, admin),
                ("GET", "/v1/events", None, {"Authorization": "Bearer fgt_not-a-token"}),
                ("GET", "/readyz", None, {}),
            ):
                r = await timed(client.request(method, path, json=body, headers=token), 1.0)
                assert unavailable(r), (path, r.status_code, r.text)
                if path != "/readyz":  # the probe, unauthenticated, names no more than a class
                    message = r.json()["message"]
                    assert "the database did not answer" in message, message
                    assert message.endswith("within 1 s"), message
            proxy.silent = False
            assert (await client.get("/readyz")).status_code == 200
            r = await client.post("/v1/namespaces/t/placements", json=place, headers=admin)
            assert r.status_code == 201, r.text
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGINT)
            try:
                await asyncio.wait_for(proc.wait(), HANG_SECONDS)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        await proxy.stop()
    lines = log.read_text().splitlines()
    lost = [line for line in lines if "lost the database" in line]
    back = [line for line in lines if "answers again (after" in line]
    assert len(lost) == 1 and "warning" in lost[0].lower(), lost
    assert len(back) == 1 and "info" in back[0].lower(), lines[-40:]
    assert "silent-admin-token" not in log.read_text()


NODE = {"threads": 4, "memory_mb": 8192, "disk_gb": 100}


async def served(client: httpx.AsyncClient, proc: asyncio.subprocess.Process) -> bool:
    """Whether the API answers ``/readyz`` (failing the test if its process has exited)."""
    assert proc.returncode is None, f"fleetgate api exited with {proc.returncode}"
    try:
        return (await client.get("/readyz", timeout=2)).status_code == 200
    except httpx.TransportError:
        return False
