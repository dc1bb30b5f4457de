"""Every way to run fleetgate's checks. ``nox -s ci`` is what CI runs; see DEVELOPERS.md.

Each session installs the locked workspace into its own uv virtualenv and calls ``tests_impl``
(one helper for every test session, as urllib3's noxfile does).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import ModuleType
from urllib.parse import urlsplit

import nox

nox.options.default_venv_backend = "uv"
nox.options.error_on_missing_interpreters = True
# The suite runs on the Pythons the machine has (PATH, or pyenv's): none is downloaded, so a
# newer Python that is absent fails its session ("Python interpreter 3.13 not found").
nox.options.download_python = "never"
nox.options.sessions = ["ci"]

ROOT = Path(__file__).parent
#: The database servers the tests use: the variable that names each, and its default URL.
SERVERS = {
    "mariadb": ("FLEETGATE_MARIADB_URL", "mysql+aiomysql://root@127.0.0.1:3306/test"),
    "postgres": ("FLEETGATE_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test"),
}
#: The newer Pythons a core of the suite runs on (the full suite runs on the one running nox).
NEWER_PYTHONS = ("3.12", "3.13")
PYTEST_FLAGS = ["-ra", "--tb=short", "--durations=10", "--strict-config", "--strict-markers"]


def interpreter(version: str) -> str:
    """Python ``version``'s interpreter: pyenv's newest patch release of it when pyenv has one
    (its shims answer only for the selected version), else the bare version for nox to find."""
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    installed = sorted(
        (root / "versions").glob(f"{version}.*/bin/python{version}"),
        key=lambda p: [int(part) for part in p.parents[1].name.split(".") if part.isdigit()],
    )
    return str(installed[-1]) if installed else version


def _clusters() -> ModuleType:
    """tests/clusters.py, the one place that starts database servers of our own."""
    sys.path.insert(0, str(ROOT))
    import tests.clusters

    return tests.clusters


def accepts(kind: str, url: str) -> bool:
    """Whether the ``kind`` server at ``url`` lets the URL's user into its database (asked with
    the server's own client): a server that merely listens may not, as a freshly installed
    MariaDB (root by socket only) or PostgreSQL (passwords over TCP) does not."""
    parts = urlsplit(url)
    host, user, database = parts.hostname or "127.0.0.1", parts.username or "", parts.path[1:]
    if kind == "mariadb":
        port = parts.port or 3306
        ask = ["mariadb", "--protocol=tcp", f"--host={host}", f"--port={port}", f"--user={user}"]
        ask += ["--connect-timeout=5", "--execute=SELECT 1", database]
    else:
        conninfo = f"host={host} port={parts.port or 5432} user={user} dbname={database}"
        ask = ["psql", "--no-password", "-Atc", "SELECT 1", f"{conninfo} connect_timeout=5"]
    try:
        answer = subprocess.run(ask, capture_output=True, stdin=subprocess.DEVNULL, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return answer.returncode == 0


@contextmanager
def database_servers(session: nox.Session, *kinds: str) -> Iterator[dict[str, str]]:
    """The URL variable of each server in ``kinds`` ("mariadb", "postgres"): as set in the
    environment; else the machine's own server on its standard port where it lets the default
    URL in; else a server started here on a reserved port and stopped when this exits."""
    with ExitStack() as stack:
        urls: dict[str, str] = {}
        for kind in kinds:
            variable, default = SERVERS[kind]
            url = os.environ.get(variable) or default
            if variable not in os.environ and not accepts(kind, default):
                clusters = _clusters()
                server = clusters.MariaDB() if kind == "mariadb" else clusters.Postgres()
                stack.enter_context(server)
                url = server.url()
                session.log(f"{default} does not serve: {kind} started at {url} ({server.base})")
            urls[variable] = url
        yield urls


def install(session: nox.Session) -> None:
    """Install the locked workspace (all three distributions and the dev tools)."""
    session.run_install(
        "uv",
        "sync",
        "--locked",
        "--all-packages",
        env={"UV_PROJECT_ENVIRONMENT": session.virtualenv.location},
        external=True,
    )


def pytest(session: nox.Session, *selection: str, env: dict[str, str] | None = None) -> None:
    """Run pytest over ``selection`` with the strict flags and the given environment."""
    session.run(
        "python",
        "-m",
        "pytest",
        *PYTEST_FLAGS,
        *selection,
        *session.posargs,
        env={"PYTHONWARNINGS": "default", **(env or {})},
    )


def tests_impl(
    session: nox.Session,
    *selection: str,
    database: str | None = None,
    servers: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> None:
    """Install, then run pytest over ``selection``: the backend tests on the server ``database``
    names ("mariadb", "postgres"; None: SQLite), with the URLs of it and of ``servers`` set."""
    install(session)
    kinds = tuple(dict.fromkeys([*servers, *([database] if database else [])]))
    with database_servers(session, *kinds) as urls:
        under_test = urls[SERVERS[database][0]] if database else ""
        pytest(
            session,
            *selection,
            env={**urls, "FLEETGATE_TEST_DATABASE_URL": under_test, **(env or {})},
        )


@nox.session
def tests(session: nox.Session) -> None:
    """Everything that needs no server: domain, SQLite, fake cluster, apps, the browser test.
    (The log and URL secrecy tests start fleetgate on a PostgreSQL database of their own.)"""
    tests_impl(session, "tests", servers=("postgres",))


@nox.session
@nox.parametrize("python", [interpreter(v) for v in NEWER_PYTHONS], ids=list(NEWER_PYTHONS))
def tests_newer_python(session: nox.Session) -> None:
    """On a newer Python: the domain's unit tests, and the backend suites on SQLite and on
    PostgreSQL 15. The session fails when the machine has no such Python."""
    tests_impl(session, "tests/unit")
    tests_impl(session, "-m", "backend", "tests")
    tests_impl(session, "-m", "backend", "tests", database="postgres")


@nox.session
@nox.parametrize("regime", ["default", "snapshot"])
def tests_mariadb(session: nox.Session, regime: str) -> None:
    """The backend suites on MariaDB, in the server's default regime and with snapshot isolation."""
    tests_impl(
        session,
        "-m",
        "backend",
        "tests",
        database="mariadb",
        env={"FLEETGATE_TEST_MARIADB_SNAPSHOT": "on" if regime == "snapshot" else ""},
    )


@nox.session
@nox.parametrize("version", ["15", "16"])
def tests_postgres(session: nox.Session, version: str) -> None:
    """The backend suites on PostgreSQL 15 (this machine's server) and 16 (a pgserver instance)."""
    if version == "15":
        tests_impl(session, "-m", "backend", "tests", database="postgres")
        return
    install(session)
    with tempfile.TemporaryDirectory(prefix="fleetgate-pg16-") as pgdata:
        printed = session.run(
            "python",
            "-c",
            "import sys, pgserver; s = pgserver.get_server(sys.argv[1], cleanup_mode=None);"
            "print(s.get_uri())",
            pgdata,
            silent=True,
        )
        url = str(printed).strip().splitlines()[-1]
        try:
            tests_impl(
                session,
                "-m",
                "backend",
                "tests",
                env={"FLEETGATE_TEST_DATABASE_URL": _asyncpg_url(url)},
            )
        finally:
            session.run(
                "python",
                "-c",
                "import sys, pgserver; pgserver.get_server(sys.argv[1]).cleanup()",
                pgdata,
                silent=True,
                success_codes=[0, 1],
            )


def _asyncpg_url(uri: str) -> str:
    """pgserver's libpq URI (socket in ``host=``) as an asyncpg SQLAlchemy URL."""
    from urllib.parse import parse_qs

    parts = urlsplit(uri)
    host = parse_qs(parts.query).get("host", [""])[0]
    user = parts.username or "postgres"
    database = parts.path.lstrip("/") or "postgres"
    return f"postgresql+asyncpg://{user}@/{database}?host={host}"


#: The backend suites that decide correctness under concurrency, run again on a Galera node.
GALERA_SUITES = (
    "tests/adapters/sql/test_concurrency.py",
    "tests/adapters/sql/test_claims.py",
    "tests/adapters/sql/test_faults.py",
    "tests/adapters/sql/test_galera.py",
)


@nox.session
def tests_galera(session: nox.Session) -> None:
    """A three-node MariaDB Galera cluster started here (tests/clusters.py): the concurrency,
    claims and fault suites on one node, and the multi-primary tests with writers on every node.
    A cluster that cannot start fails the session; nothing is skipped."""
    install(session)
    with _clusters().Galera() as cluster:
        tests_impl(
            session,
            "-m",
            "backend or galera",
            *GALERA_SUITES,
            env={
                "FLEETGATE_TEST_DATABASE_URL": cluster.urls[0],
                "FLEETGATE_TEST_GALERA_URLS": ",".join(cluster.urls),
                "FLEETGATE_TEST_CLUSTERS": "on",
            },
        )


@nox.session
def tests_failover(session: nox.Session) -> None:
    """SIGKILL a PostgreSQL 15 primary (its synchronous standby promoted) and a Galera node
    under load; the tests start their own clusters, so each kill has a cluster to itself."""
    tests_impl(
        session,
        "-m",
        "failover",
        "tests/adapters/sql/test_failover.py",
        env={"FLEETGATE_TEST_CLUSTERS": "on"},
    )


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (lint and format) and the import-linter contracts of design.md."""
    install(session)
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("lint-imports")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy, strict for the domain."""
    install(session)
    session.run(
        "mypy",
        "packages/domain/src/fleetgate/domain",
        "packages/adapters/src/fleetgate/adapters",
        "packages/apps/src/fleetgate/apps",
    )


@nox.session
def bench(session: nox.Session) -> None:
    """Run the benchmarks and rewrite docs/performance.md."""
    install(session)
    with database_servers(session, "mariadb", "postgres") as urls:
        session.run("python", "-m", "benchmarks", *session.posargs, env=urls)


@nox.session
def demo(session: nox.Session) -> None:
    """The main job on the embedded default: check every example policy."""
    install(session)
    for policy in sorted((ROOT / "examples").glob("*policy*.yaml")):
        session.run(
            "fleetgate",
            "check",
            str(policy),
            "--expire-after",
            "14d",
            "--termination-grace-period",
            "1h",
            success_codes=[0, 1],
        )


#: What CI runs, in two lanes that run side by side: the SQLite suite is CPU-bound in Python,
#: the server suites wait on their databases half the time, so together they fit two cores.
#: The cluster lanes (issue 29) take a few minutes each, one per lane; so does each newer
#: Python's core (about two server suites: its PostgreSQL half, and its unit and SQLite halves).
CI_LANES = (
    (
        "lint",
        "typecheck",
        "tests",
        "tests_postgres(version='16')",
        "tests_failover",
        "tests_newer_python(3.12)",
    ),
    (
        "tests_mariadb(regime='default')",
        "tests_mariadb(regime='snapshot')",
        "tests_postgres(version='15')",
        "tests_galera",
        "tests_newer_python(3.13)",
    ),
)


@nox.session(venv_backend="none")
def ci(session: nox.Session) -> None:
    """Everything CI runs: lint, types, and the tests on every backend (two lanes at once).

    Database servers are settled once for both lanes: where the machine serves none on the
    standard ports, the ones started here serve every session of either lane.
    """
    logs = Path(tempfile.mkdtemp(prefix="fleetgate-ci-"))
    with database_servers(session, *SERVERS) as urls:
        lanes = []
        for number, names in enumerate(CI_LANES, start=1):
            log = logs / f"lane{number}.log"
            cmd = [sys.executable, "-m", "nox", "--no-color", "-s", *names]
            with log.open("w") as out:
                proc = subprocess.Popen(
                    cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **urls}
                )
            lanes.append((number, names, log, proc))
            session.log(f"lane {number}: {', '.join(names)} (log: {log})")
        started = time.monotonic()
        took: dict[int, float] = {}  # lane number -> minutes until it ended
        while len(took) < len(lanes):
            for number, _, _, proc in lanes:
                if number not in took and proc.poll() is not None:
                    took[number] = (time.monotonic() - started) / 60
            time.sleep(1.0)
    failed = []
    for _, names, log, proc in lanes:
        text = log.read_text()
        print(text, flush=True)  # each lane's whole output, in lane order
        if proc.returncode != 0:
            failed.extend(lane_failures(text) or names)
    session.log(", ".join(f"lane {n} took {m:.1f} min" for n, m in sorted(took.items())))
    if failed:
        # The end of CI's output is what a reader sees first: name each failed session and the
        # tests it failed there, not the whole lane it ran in.
        session.error("failed: " + "; ".join(failed))


#: A line of pytest's short summary: the outcome, one space, a test file (with ``::test``).
SUMMARY_LINE = re.compile(r"(FAILED|ERROR) [^\s:]+\.py(::|\s|$)")


def lane_failures(text: str) -> list[str]:
    """The failed sessions of a lane's nox output, each with the tests pytest failed in it.

    nox ends with one ``* name: outcome`` line per session; pytest's short summary names each
    failed or erroring test (``FAILED path::test - reason``) inside the session that ran it. A
    captured log line (``ERROR    sqlalchemy.pool…``) names no test file and is not one.
    """
    failures: list[str] = []
    tests: list[str] = []
    for line in text.splitlines():
        if SUMMARY_LINE.match(line):
            tests.append(line.split(" - ", 1)[0])
        elif line.startswith("nox > Session ") and line.rstrip().endswith(" failed."):
            name = line.removeprefix("nox > Session ").rsplit(" failed.", 1)[0]
            failures.append(f"{name} ({', '.join(tests)})" if tests else name)
            tests = []
        elif line.startswith("nox > Session "):
            tests = []
    return failures
