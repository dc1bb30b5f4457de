"""No secret in anything the processes print, read as an attacker reads logs.

A database password and an admin token are planted in the configuration of the real commands;
every failure path we can drive is driven (a database dropped under a serving API, requests that
carry the token in a header, a query string and a cookie, start-up failures, bad configuration),
in both log formats, and everything each process printed (stdout and stderr) is searched for the
secrets. The database is a fresh one on the machine's PostgreSQL server, whose trust
authentication ignores the password, so the API really serves with the password in its URL.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import make_url

from tests.backends import create_database, drop_database
from tests.servers import FLEETGATE, free_port, wait_until_serving

PASSWORD = "pw-Planted-" + secrets.token_hex(4)
TOKEN = "tok-Planted-" + secrets.token_hex(8)
SERVER = os.environ.get(
    "FLEETGATE_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
)
REFUSING = f"postgresql+asyncpg://fleet:{PASSWORD}@127.0.0.1:1/x"


def environment(url: str, fmt: str = "console", **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEETGATE_", "PROMETHEUS"))}
    return {
        **env,
        "FLEETGATE_DATABASE_URL": url,
        "FLEETGATE_API__ADMIN_TOKEN": TOKEN,
        "FLEETGATE_LOG_FORMAT": fmt,
        **extra,
    }


def assert_no_secret(printed: str, *more: str) -> None:
    for secret in (PASSWORD, TOKEN, *more):
        assert secret not in printed, f"{secret} printed:\n{printed[-3000:]}"


@pytest.fixture
def database() -> Iterator[tuple[str, str]]:
    """A fresh database's name and its URL with the planted password."""
    name = f"fgt_{os.getpid()}_{secrets.token_hex(3)}"
    created = make_url(create_database(SERVER, name))
    try:
        yield name, created.set(password=PASSWORD).render_as_string(hide_password=False)
    finally:
        drop_database(SERVER, name)


def _requests(base: str, dropped: str) -> list[int]:
    """Drive the API's paths with the token everywhere a client may put it; drop the database
    half-way (``dropped``); the statuses of the requests made after the drop."""
    admin = {"Authorization": f"Bearer {TOKEN}"}
    after: list[int] = []
    with httpx.Client(base_url=base, timeout=60) as http:
        http.put(
            "/v1/nodes/hv-1", json={"threads": 4, "memory_mb": 8192, "disk_gb": 100}, headers=admin
        )
        team = http.post("/v1/admin/namespaces/ci/tokens", headers=admin).json()["secret"]
        http.post(
            "/v1/namespaces/ci/placements",
            json={"cpus": 1, "memory_mb": 512, "disk_gb": 1, "request_id": "r-1"},
            headers={"Authorization": f"Bearer {team}"},
        )
        http.get(f"/v1/nodes?token={TOKEN}", headers={"Cookie": f"fleetgate_session={TOKEN}"})
        http.get("/v1/nodes", headers={"Authorization": f"Bearer {TOKEN}x"})  # a near miss
        drop_database(SERVER, dropped)
        for method, path, body in [
            ("GET", "/v1/nodes", None),
            ("POST", "/v1/namespaces/ci/placements", {"cpus": 1, "memory_mb": 1, "disk_gb": 1}),
            ("PUT", "/v1/nodes/hv-2", {"threads": 1, "memory_mb": 1, "disk_gb": 1}),
            ("GET", "/readyz", None),
        ]:
            try:
                after.append(http.request(method, path, json=body, headers=admin).status_code)
            except httpx.TransportError:
                after.append(0)  # no answer at all is a failure too (the secret test holds)
    return after


@pytest.mark.parametrize("fmt", ["console", "json"])
def test_a_serving_api_whose_database_is_dropped_prints_no_secret(
    fmt: str, database: tuple[str, str], tmp_path: Path
) -> None:
    name, url = database
    port = free_port()
    log = tmp_path / "api.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(
            [str(FLEETGATE), "api", "--host", "127.0.0.1", "--port", str(port)],
            env=environment(url, fmt),
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
        )
        try:
            wait_until_serving(f"http://127.0.0.1:{port}", proc, seconds=180)  # type: ignore[arg-type]
            after = _requests(f"http://127.0.0.1:{port}", name)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    printed = log.read_text()
    assert all(status >= 500 or status == 0 for status in after), (after, printed[-3000:])
    assert "hv-1" in printed or "/v1/nodes" in printed or "placement" in printed  # it logged
    assert_no_secret(printed)


def run(args: tuple[str, ...], env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run(
        [str(FLEETGATE), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
        check=False,
    )
    assert done.returncode != 0, done.stdout + done.stderr
    return done.stdout + done.stderr


FAILED_STARTS = [
    (("api", "--port", "0"), {}, "console"),
    (("api", "--port", "0"), {}, "json"),
    (("api", "--port", "0", "--workers", "2"), {}, "json"),
    (("reconciler", "--once"), {}, "json"),
    (("controller", "--once"), {"FLEETGATE_CONTROLLER__SYNC_LEDGER": "true"}, "console"),
    (("db", "upgrade"), {}, "console"),
    (("api", "--port", "0"), {"FLEETGATE_API__PORT": "99999"}, "console"),  # bad config
    (("api", "--port", "0"), {"FLEETGATE_CAPACITY__TARGET_LOAD": "-1"}, "json"),
    (("api", "--port", "0"), {"FLEETGATE_DATABASE_URL": f"oracle://u:{PASSWORD}@db/x"}, "json"),
    (("api", "--port", "0"), {"FLEETGATE_API__ADMIN_TOKNE": TOKEN}, "console"),  # a typo
]


@pytest.mark.parametrize(
    ("args", "extra", "fmt"),
    FAILED_STARTS,
    ids=[" ".join((*a, *e, f)) for a, e, f in FAILED_STARTS],
)
def test_a_failed_start_prints_no_secret(
    args: tuple[str, ...], extra: dict[str, str], fmt: str, tmp_path: Path
) -> None:
    printed = run(args, environment(REFUSING, fmt, **extra), tmp_path)
    assert "error" in printed
    assert_no_secret(printed)
