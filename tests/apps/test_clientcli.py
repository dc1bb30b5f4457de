"""``fleetgate nodes|placements|claims|events`` and the typed client, against a real API server
(``fleetgate api`` under uvicorn on 127.0.0.1, over a SQLite file)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from typer.testing import CliRunner, Result

from fleetgate.apps.api.app import create_app
from fleetgate.apps.api.schemas import PlacementCreate
from fleetgate.apps.cli import app
from fleetgate.apps.container import build_container
from fleetgate.apps.settings import ApiSettings, ControllerSettings, Settings
from fleetgate.client import ClientError, FleetgateClient
from tests.apps.api.routes.test_rotation_status import POLICY
from tests.servers import FLEETGATE, free_port, running_api

ADMIN_TOKEN = "client-cli-admin-token"
NS = "team-a"


def size(cpus: int, memory_mb: int, disk_gb: int, **where: str) -> PlacementCreate:
    """A placement request, as the API's own schema."""
    return PlacementCreate(cpus=cpus, memory_mb=memory_mb, disk_gb=disk_gb, **where)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One running API for the module, with two nodes, a claim and two placements."""
    db = tmp_path_factory.mktemp("clientcli") / "api.db"
    with running_api(db, token=ADMIN_TOKEN, seconds=90) as url:
        with FleetgateClient(url, ADMIN_TOKEN) as api:
            http = api._http  # seeding through the API itself, as an operator would
            for name, threads in (("hv-1", 8), ("hv-2", 16)):
                body = {"threads": threads, "memory_mb": 32768, "disk_gb": 500}
                assert http.put(f"/v1/nodes/{name}", json=body).status_code == 201
            claim = {"cpus": 8, "memory_mb": 8192, "disk_gb": 100, "expires_in_seconds": 3600}
            assert http.post(f"/v1/namespaces/{NS}/claims", json=claim).status_code == 201
            api.place(NS, size(2, 1024, 10, node="hv-1", request_id="job-1"))
            api.place(NS, size(1, 512, 5, node="hv-2"))
        yield url


def cli(*args: str, env: dict[str, str] | None = None) -> Result:
    """Run the ``fleetgate`` command in this process (the API it talks to is a real server)."""
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("FLEETGATE_")}
    return CliRunner().invoke(app, list(args), env={**unset, "COLUMNS": "200", **(env or {})})


def test_nodes_prints_a_table_and_json(base: str) -> None:
    # Once through the installed console script, end to end.
    table = console("nodes", "--server", base, "--token", ADMIN_TOKEN)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[:3] == ["NAME", "POOL", "CPUS"]
    assert [line.split()[0] for line in lines[1:]] == ["hv-1", "hv-2"]
    assert lines[1].split()[2] == "2/24"  # used/limit
    as_json = cli("nodes", "--server", base, "--token", ADMIN_TOKEN, "--output", "json")
    nodes = json.loads(as_json.stdout)
    assert [(n["name"], n["used"]["cpus"]) for n in nodes] == [("hv-1", 2), ("hv-2", 1)]


def test_the_server_and_token_come_from_the_environment(base: str) -> None:
    env = {"FLEETGATE_SERVER": base, "FLEETGATE_TOKEN": ADMIN_TOKEN}
    found = json.loads(cli("placements", "-n", NS, "-o", "json", env=env).stdout)
    assert sorted((p["node"], p["cpus"], p["request_id"]) for p in found) == [
        ("hv-1", 2, "job-1"),
        ("hv-2", 1, None),
    ]
    claims = cli("claims", "-n", NS, env=env)
    assert claims.exit_code == 0
    assert "3/8" in claims.stdout and "active" in claims.stdout


def test_events_are_newest_first_and_filtered_by_kind(base: str) -> None:
    env = {"FLEETGATE_SERVER": base, "FLEETGATE_TOKEN": ADMIN_TOKEN}
    placed = json.loads(cli("events", "--kind", "instance placed", "-o", "json", env=env).stdout)
    assert [e["data"]["node"] for e in placed] == ["hv-2", "hv-1"]
    oldest = json.loads(
        cli("events", "--oldest-first", "--limit", "1", "-o", "json", env=env).stdout
    )
    assert len(oldest) == 1 and oldest[0]["id"] < placed[-1]["id"]


def test_a_bad_token_exits_1_with_the_apis_reason_and_never_echoes_the_token(base: str) -> None:
    r = cli("nodes", "--server", base, "--token", "not-a-real-secret-token")
    assert r.exit_code == 1
    assert "401" in r.stderr and "not-a-real-secret-token" not in r.stderr + r.stdout


def test_an_unreachable_server_exits_1_naming_it() -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    r = cli("nodes", "--server", dead, "--token", ADMIN_TOKEN)
    assert r.exit_code == 1 and dead in r.stderr and ADMIN_TOKEN not in r.stderr


def test_a_server_url_with_a_password_is_shown_without_it() -> None:
    dead = f"http://fleet:pw-in-server-url-9@127.0.0.1:{free_port()}"
    r = cli("nodes", "--server", dead, "--token", ADMIN_TOKEN)
    assert r.exit_code == 1 and "fleet:***@127.0.0.1" in r.stderr
    assert "pw-in-server-url-9" not in r.stderr + r.stdout
    assert "pw-in-server-url-9" not in repr(FleetgateClient(dead))


def test_an_error_with_brackets_is_printed_as_the_api_wrote_it(base: str) -> None:
    # The API's 422 names the namespace pattern; rich once read its [a-z0-9] as markup.
    r = cli("placements", "-n", "Not_A_Namespace", "--server", base, "--token", ADMIN_TOKEN)
    assert r.exit_code == 1
    assert "^[a-z0-9]([a-z0-9-]*[a-z0-9])?$" in " ".join(r.stderr.split()), r.stderr


def test_bad_input_exits_2_naming_the_option(base: str) -> None:
    r = cli("events", "--server", base, "--limit", "0")
    assert r.exit_code == 2 and "--limit" in r.stderr
    r = cli("nodes", "--server", base, "--output", "yaml")
    assert r.exit_code == 2 and "--output" in r.stderr


def test_the_client_answers_with_the_apis_bodies_and_raises_its_errors(base: str) -> None:
    with FleetgateClient(base, ADMIN_TOKEN) as api:
        dry = api.dry_run(NS, size(1, 256, 1, node="hv-2"))
        assert dry.node == "hv-2" and dry.over_claim is False
        assert len(api.placements(NS)) == 2  # the dry run placed nothing
        resources = api.resources()
        assert resources.cluster.total.cpus == 24 + 48
        with pytest.raises(ClientError) as refused:
            api.place(NS, size(1, 1, 1000, node="hv-1"))
        assert (refused.value.status, refused.value.code) == (507, "insufficient_capacity")
        assert ADMIN_TOKEN not in repr(api) + str(refused.value)
        made = api.place(NS, size(1, 1, 1))
        api.release(NS, made.id)
        with pytest.raises(ClientError) as gone:
            api.release(NS, made.id)
        assert gone.value.status == 404


def test_the_client_follows_the_pages(base: str) -> None:
    with FleetgateClient(base, ADMIN_TOKEN) as api:
        ids = {api.place("team-pages", size(1, 1, 1)).id for _ in range(3)}
        # One per page: the client follows Link rel="next" until the last page.
        assert {p.id for p in api.placements("team-pages", page_size=1)} == ids
        assert [n.name for n in api.nodes(page_size=1)] == ["hv-1", "hv-2"]


@pytest.fixture
def pools_base(tmp_path: Path) -> Iterator[str]:
    """The API under uvicorn on 127.0.0.1 (in a thread), its fake cluster holding two pools."""
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    settings = Settings(
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'api.db'}",
        api=ApiSettings(admin_token=ADMIN_TOKEN),
        controller=ControllerSettings(policies=[path]),
    )
    container = build_container(settings)
    cluster = container.cluster()
    cluster.add_pool("web", expire_after="14d", termination_grace_period="1h",
                     labels={"fleetgate.io/rotation": "nightly"})  # fmt: skip
    cluster.add_pool("batch", expire_after="14d")
    cluster.add_node("web")
    port = free_port()
    config = uvicorn.Config(create_app(container), host="127.0.0.1", port=port, log_config=None)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def console(*args: str) -> subprocess.CompletedProcess[str]:
    """The installed ``fleetgate`` script (this process's own server logs stay out of it)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FLEETGATE_")}
    return subprocess.run([str(FLEETGATE), *args], env={**clean, "COLUMNS": "200"},
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def test_status_summarises_every_pool_like_kubectl_get(pools_base: str) -> None:
    r = console("status", "--server", pools_base, "--token", ADMIN_TOKEN)
    assert r.returncode == 0, r.stderr
    header, *rows = r.stdout.splitlines()
    assert header.split()[:4] == ["POOL", "POLICY", "NODES", "WINDOW"]
    cells = {row.split()[0]: row.split() for row in rows}
    assert cells["web"][1:3] == ["nightly", "1"] and cells["batch"][1] == "ungoverned"
    as_json = json.loads(console("status", "--server", pools_base, "--token", ADMIN_TOKEN,
                                 "-o", "json").stdout)  # fmt: skip
    web = next(p for p in as_json if p["pool"] == "web")
    assert web["next_window_start"] is not None and web["guaranteed_chances"] >= 1
