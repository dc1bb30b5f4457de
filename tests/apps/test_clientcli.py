"""``fleetgate nodes|placements|claims|events`` and the typed client, against a real API server
(``fleetgate api`` under uvicorn on 127.0.0.1, over a SQLite file)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from fleetgate.apps import clientwatch
from fleetgate.apps.api.app import create_app
from fleetgate.apps.api.schemas import PlacementCreate
from fleetgate.apps.cli import app
from fleetgate.apps.clientcli import exit_code
from fleetgate.apps.container import build_container
from fleetgate.apps.settings import ApiSettings, ControllerSettings, Settings
from fleetgate.client import ClientError, FleetgateClient
from tests.apps.api.routes.test_rotation_status import POLICY
from tests.servers import FLEETGATE, free_port, running_api, serving_in_thread

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
            # Seeding through the API itself, as an operator would (plain mappings as requests).
            for name, threads in (("hv-1", 8), ("hv-2", 16)):
                api.put_node(name, {"threads": threads, "memory_mb": 32768, "disk_gb": 500})
            claim = {"cpus": 8, "memory_mb": 8192, "disk_gb": 100, "expires_in_seconds": 3600}
            api.create_claim(NS, claim)
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


def test_an_unreachable_server_exits_3_naming_it_in_one_line() -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    r = cli("nodes", "--server", dead, "--token", ADMIN_TOKEN)
    assert r.exit_code == 3 and dead in r.stderr and ADMIN_TOKEN not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_server_url_with_a_password_is_shown_without_it() -> None:
    dead = f"http://fleet:pw-in-server-url-9@127.0.0.1:{free_port()}"
    r = cli("nodes", "--server", dead, "--token", ADMIN_TOKEN)
    assert r.exit_code == 3 and "fleet:***@127.0.0.1" in r.stderr  # 3: unreachable
    assert "pw-in-server-url-9" not in r.stderr + r.stdout
    assert "pw-in-server-url-9" not in repr(FleetgateClient(dead))


def test_an_error_with_brackets_is_printed_as_the_api_wrote_it(base: str) -> None:
    # The API's 422 names the namespace pattern; rich once read its [a-z0-9] as markup.
    r = cli("placements", "-n", "Not_A_Namespace", "--server", base, "--token", ADMIN_TOKEN)
    assert r.exit_code == 2  # the API's 422: bad input
    assert "^[a-z0-9]([a-z0-9-]*[a-z0-9])?$" in " ".join(r.stderr.split()), r.stderr


def test_bad_input_exits_2_naming_the_option(base: str) -> None:
    r = cli("events", "--server", base, "--limit", "0")
    assert r.exit_code == 2 and "--limit" in r.stderr
    r = cli("nodes", "--server", base, "--output", "xml")
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
    with serving_in_thread(create_app(container)) as url:
        yield url


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


#: What a client command or ``fleetgate check`` never needs: the server and the database.
SERVER_SIDE = ("fastapi", "starlette", "uvicorn", "sqlalchemy", "alembic", "fleetgate.adapters")
#: What the start-up work took out (docs/performance.md, CLI start-up): httpx and what it pulls
#: in (httpcore, h11, anyio or trio, its command-line tool's click, rich and pygments), pydantic
#: (typer's adapters, the client's bodies, a write's local check of its body) and the API's
#: schemas.
STARTUP_BUDGET = (*SERVER_SIDE, "httpx", "httpcore", "h11", "anyio", "trio", "click", "pygments",
                  "pydantic", "pydantic_core", "fleetgate.apps.api")  # fmt: skip
#: What ``check`` loads only for ``--ledger``/``--ledger-snapshot``: the forecast, its event
#: loop and the capacity domain.
LEDGER_FORECAST = ("fleetgate.apps.ledgerforecast", "asyncio", "fleetgate.domain.capacity")
SNAPSHOT = "nodes:\n  - {name: n-1, pool: general, cpus: 24, memoryMb: 32768, diskGb: 100}\n"
_RUN_AND_REPORT = """
import json, sys
sys.argv = ["fleetgate", *json.loads(sys.argv[1])]
from fleetgate.apps.cli import main
try:
    main()
finally:
    print("LOADED " + json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def loaded_modules(*args: str, **env: str) -> list[str]:
    """Run ``fleetgate ARGS`` in a fresh interpreter; every module it imported."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FLEETGATE_")} | env
    run = subprocess.run([sys.executable, "-c", _RUN_AND_REPORT, json.dumps(args)], env=clean,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    report = [line for line in run.stderr.splitlines() if line.startswith("LOADED ")]
    assert report, run.stderr
    found: list[str] = json.loads(report[-1].removeprefix("LOADED "))
    return found


def within(loaded: list[str], packages: tuple[str, ...]) -> list[str]:
    """The modules of ``loaded`` that belong to one of ``packages``."""
    return [m for m in loaded if any(m == p or m.startswith(f"{p}.") for p in packages)]


def test_client_commands_and_check_import_nothing_of_the_server(base: str, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    auth = ("--server", base, "--token", ADMIN_TOKEN)
    commands = [
        ("nodes", *auth, "-o", "wide"),
        ("placements", "-n", NS, *auth),
        ("claims", "-n", NS, *auth, "-o", "yaml"),
        ("events", *auth, "--kind", "no such kind"),
        ("status", *auth),
        ("node", "get", "hv-1", *auth, "-o", "json"),
        ("tokens", "list", NS, *auth),
        ("check", str(policy), "--expire-after", "14d"),
        ("check", str(policy), "--expire-after", "14d", "-o", "json"),
        ("version",),
        # The writes with a body send it as given: the API's 422 is the one check of it.
        ("place", NS, "--cpus", "1", "--memory-mb", "1", "--dry-run", *auth),
        ("claims", "create", "team-budget", "--cpus", "1", "--memory-mb", "1", "--expires-in",
         "1h", "-o", "name", *auth),
        ("node", "put", "hv-budget", "--threads", "2", "--memory-mb", "64", "--disk-gb", "1",
         "--label", "tier=gold", *auth),
        ("tokens", "create", "team-budget", "-o", "name", *auth),
    ]  # fmt: skip
    for command in commands:
        loaded = loaded_modules(*command)
        assert within(loaded, STARTUP_BUDGET) == [], command
        assert within(loaded, LEDGER_FORECAST) == [], command
        if command[0] != "check" or "json" in command:  # rich prints check's tables, no more
            assert within(loaded, ("rich",)) == [], command
    # A refused body is the API's 422 (exit 2) or refusal (exit 1): no schema of the client's.
    # The error line is masked (redaction.redact): a line with no credential word needs none of
    # the shapes; one with a word masks URL passwords with the adapters' one rule, a module on
    # the standard library alone. Never the plugin machinery, nothing more of the list.
    masking = {"fleetgate.adapters", "fleetgate.adapters.urlredaction"}
    for refused in (("place", NS, "--cpus", "-1", "--memory-mb", "1", *auth),
                    ("claims", "update", NS, "no-such-claim", "--cpus", "2", *auth)):  # fmt: skip
        loaded = loaded_modules(*refused)
        assert set(within(loaded, STARTUP_BUDGET)) <= masking, refused
        assert within(loaded, ("pydantic", "rich", "pluggy", *LEDGER_FORECAST)) == [], refused
    # The forecast loads when asked for, and the probe sees it.
    snapshot = tmp_path / "ledger.yaml"
    snapshot.write_text(SNAPSHOT)
    forecast = loaded_modules("check", str(policy), "--expire-after", "14d", "-o", "json",
                              "--ledger-snapshot", str(snapshot))  # fmt: skip
    assert "fleetgate.apps.ledgerforecast" in forecast and "asyncio" in forecast
    # It judges with the configured demand policy, so it reads (and validates) the settings:
    # pydantic, but nothing of the server.
    assert within(forecast, SERVER_SIDE) == []
    # The probe does see them when they are imported: a database command loads SQLAlchemy.
    db = f"sqlite+aiosqlite:///{tmp_path / 'probe.db'}"
    assert "sqlalchemy" in loaded_modules("db", "current", FLEETGATE_DATABASE_URL=db)


def test_events_watch_prints_the_newest_then_each_new_one_once(
    base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pauses: list[float] = []
    placed: list[str] = []

    def pause(seconds: float) -> None:
        # Between the first two polls something happens; then nothing more (bound by count).
        pauses.append(seconds)
        if len(pauses) == 1:
            with FleetgateClient(base, ADMIN_TOKEN) as api:
                placed.append(api.place("team-watch", size(1, 1, 1)).id)

    monkeypatch.setattr(clientwatch, "pause", pause)
    env = {"FLEETGATE_SERVER": base, "FLEETGATE_TOKEN": ADMIN_TOKEN}
    r = cli("events", "--watch", "--watch-count", "3", "--interval", "7",
            "--kind", "instance placed", env=env)  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert pauses == [7, 7]
    header, *rows = r.stdout.splitlines()
    assert header.split()[:2] == ["ID", "AT"] and not any(row.startswith("ID") for row in rows)
    subjects = [row.split()[-1] for row in rows]  # SUBJECT is the last column
    assert subjects[-1] == placed[0] and subjects.count(placed[0]) == 1
    ids = [int(row.split()[0]) for row in rows]
    assert ids == sorted(ids)  # oldest first, as they happen


def test_an_empty_answer_says_why(base: str) -> None:
    env = {"FLEETGATE_SERVER": base, "FLEETGATE_TOKEN": ADMIN_TOKEN}
    bogus = cli("events", "--kind", "bogus", env=env)
    assert bogus.exit_code == 0 and bogus.stdout == ""
    assert "No events of kind 'bogus'" in bogus.stderr and "instance placed" in bogus.stderr
    assert cli("events", "--kind", "bogus", "-o", "json", env=env).stdout.strip() == "[]"
    # This API's fake cluster has no pools: status says so rather than print a bare header,
    # and --watch says it once, not at every poll.
    status = cli("status", env=env)
    assert status.exit_code == 0 and status.stdout == "" and "No NodePools" in status.stderr
    watched = cli("status", "--watch", "--watch-count", "3", "--interval", "0", env=env)
    assert watched.exit_code == 0 and watched.stderr.count("No NodePools") == 1


def test_exit_codes_tell_refused_from_bad_input_from_unavailable() -> None:
    assert [exit_code(s) for s in (401, 403, 404, 409, 507, 500)] == [1] * 6
    assert exit_code(422) == 2
    assert [exit_code(s) for s in (None, 502, 503, 504)] == [3] * 4
