"""Every way to run fleetgate's checks. ``nox -s ci`` is what CI runs; see DEVELOPERS.md.

Each session installs the locked workspace into its own uv virtualenv and calls ``tests_impl``
(one helper for every test session, as urllib3's noxfile does).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv"
nox.options.error_on_missing_interpreters = True
nox.options.sessions = ["ci"]

ROOT = Path(__file__).parent
MARIADB_URL = os.environ.get("FLEETGATE_MARIADB_URL", "mysql+aiomysql://root@127.0.0.1:3306/test")
POSTGRES_URL = os.environ.get(
    "FLEETGATE_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
)
PYTEST_FLAGS = ["-ra", "--tb=short", "--durations=10", "--strict-config", "--strict-markers"]


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


def tests_impl(session: nox.Session, *selection: str, env: dict[str, str] | None = None) -> None:
    """Run pytest over ``selection`` with the strict flags and the given environment."""
    install(session)
    session.run(
        "python",
        "-m",
        "pytest",
        *PYTEST_FLAGS,
        *selection,
        *session.posargs,
        env={"PYTHONWARNINGS": "default", **(env or {})},
    )


@nox.session
def tests(session: nox.Session) -> None:
    """Everything that needs no server: domain, SQLite, fake cluster, apps, the browser test."""
    tests_impl(session, "tests", env={"FLEETGATE_TEST_DATABASE_URL": ""})


@nox.session
@nox.parametrize("regime", ["default", "snapshot"])
def tests_mariadb(session: nox.Session, regime: str) -> None:
    """The backend suites on MariaDB, in the server's default regime and with snapshot isolation."""
    tests_impl(
        session,
        "-m",
        "backend",
        "tests",
        env={
            "FLEETGATE_TEST_DATABASE_URL": MARIADB_URL,
            "FLEETGATE_TEST_MARIADB_SNAPSHOT": "on" if regime == "snapshot" else "",
        },
    )


@nox.session
@nox.parametrize("version", ["15", "16"])
def tests_postgres(session: nox.Session, version: str) -> None:
    """The backend suites on PostgreSQL 15 (this machine's server) and 16 (a pgserver instance)."""
    if version == "15":
        tests_impl(
            session, "-m", "backend", "tests", env={"FLEETGATE_TEST_DATABASE_URL": POSTGRES_URL}
        )
        return
    install(session)
    with tempfile.TemporaryDirectory(prefix="fleetgate-pg16-") as pgdata:
        url = (
            session.run(
                "python",
                "-c",
                "import sys, pgserver; s = pgserver.get_server(sys.argv[1], cleanup_mode=None);"
                "print(s.get_uri())",
                pgdata,
                silent=True,
            )
            .strip()
            .splitlines()[-1]
        )
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
    from urllib.parse import parse_qs, urlsplit

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
    sys.path.insert(0, str(ROOT))
    from tests.clusters import Galera

    install(session)
    with Galera() as cluster:
        assert isinstance(cluster, Galera)
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
        env={"FLEETGATE_TEST_CLUSTERS": "on", "FLEETGATE_TEST_DATABASE_URL": ""},
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
    session.run(
        "python",
        "-m",
        "benchmarks",
        *session.posargs,
        env={"FLEETGATE_MARIADB_URL": MARIADB_URL, "FLEETGATE_POSTGRES_URL": POSTGRES_URL},
    )


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
#: The cluster lanes (issue 29) take a few minutes each, one per lane.
CI_LANES = (
    ("lint", "typecheck", "tests", "tests_postgres(version='16')", "tests_failover"),
    (
        "tests_mariadb(regime='default')",
        "tests_mariadb(regime='snapshot')",
        "tests_postgres(version='15')",
        "tests_galera",
    ),
)


@nox.session(venv_backend="none")
def ci(session: nox.Session) -> None:
    """Everything CI runs: lint, types, and the tests on every backend (two lanes at once)."""
    logs = Path(tempfile.mkdtemp(prefix="fleetgate-ci-"))
    lanes = []
    for number, names in enumerate(CI_LANES, start=1):
        log = logs / f"lane{number}.log"
        cmd = [sys.executable, "-m", "nox", "--no-color", "-s", *names]
        with log.open("w") as out:
            proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        lanes.append((names, log, proc))
        session.log(f"lane {number}: {', '.join(names)} (log: {log})")
    failed = []
    for names, log, proc in lanes:
        code = proc.wait()
        print(log.read_text(), flush=True)  # each lane's whole output, in lane order
        if code != 0:
            failed.append(", ".join(names))
    if failed:
        session.error("failed: " + "; ".join(failed))
