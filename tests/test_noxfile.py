"""noxfile.py's choice of database servers: the configured URL, else the machine's own server on
its standard port where it lets the default URL in, else one the session starts on a reserved
port and stops afterwards. Asked of the real servers (the machine's, and ones started here)."""

from __future__ import annotations

import noxfile
import pytest

from tests.clusters import free_ports


class Session:
    """What ``database_servers`` uses of a nox session: its log."""

    def __init__(self) -> None:
        self.logged: list[str] = []

    def log(self, message: str) -> None:
        self.logged.append(message)


def unusable(kind: str) -> str:
    """The kind's default URL made useless: a port nothing listens on (MariaDB), or a user the
    server does not know (PostgreSQL: it listens, and refuses the login)."""
    default = noxfile.SERVERS[kind][1]
    if kind == "mariadb":
        return default.replace(":3306/", f":{free_ports(1)[0]}/")
    return default.replace("//postgres@", "//no_such_user@")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["mariadb", "postgres"])
def test_where_the_default_url_is_not_served_a_server_is_started_for_the_session(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    variable = noxfile.SERVERS[kind][0]
    default = unusable(kind)
    monkeypatch.delenv(variable, raising=False)
    monkeypatch.setitem(noxfile.SERVERS, kind, (variable, default))
    assert not noxfile.accepts(kind, default)
    session = Session()
    with noxfile.database_servers(session, kind) as urls:  # type: ignore[arg-type]
        assert list(urls) == [variable]
        assert urls[variable] != default
        assert noxfile.accepts(kind, urls[variable])
        (logged,) = session.logged
        assert logged.startswith(f"{default} does not serve: {kind} started at {urls[variable]} (")
    assert not noxfile.accepts(kind, urls[variable])


def test_a_url_in_the_environment_is_used_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEETGATE_POSTGRES_URL", "postgresql+asyncpg://u@db.example:1/x")
    session = Session()
    with noxfile.database_servers(session, "postgres") as urls:  # type: ignore[arg-type]
        assert urls == {"FLEETGATE_POSTGRES_URL": "postgresql+asyncpg://u@db.example:1/x"}
    assert session.logged == []


@pytest.mark.parametrize("kind", ["mariadb", "postgres"])
def test_the_machines_own_server_is_used_where_it_lets_the_default_url_in(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """This machine's servers (3306, 5432) let root and postgres into ``test`` without a password,
    as the test sessions need."""
    variable, default = noxfile.SERVERS[kind]
    monkeypatch.delenv(variable, raising=False)
    session = Session()
    with noxfile.database_servers(session, kind) as urls:  # type: ignore[arg-type]
        assert urls == {variable: default}
    assert session.logged == []


def test_a_failed_lane_names_its_failed_sessions_and_their_tests() -> None:
    lane = "\n".join(
        [
            "nox > Running session lint",
            "nox > Session lint was successful in 4 seconds.",
            "nox > Running session tests",
            "ERROR    sqlalchemy.pool.impl.AsyncAdaptedQueuePool:(unknown file):0 Error closing",
            "FAILED tests/a.py::test_one - AssertionError: 1 != 2",
            "ERROR tests/b.py::test_two - OSError",
            "ERROR tests/c.py - ImportError: no module named x",
            "nox > Session tests failed.",
            "nox > Running session tests_failover",
            "nox > Session tests_failover raised exception ValueError('x')",
            "nox > Session tests_failover failed.",
            "nox > Running session tests_newer_python(3.12)",
            "FAILED tests/c.py::test_three - flaky? no: a real failure",
            "nox > Session tests_newer_python(3.12) was successful in 9 minutes.",
        ]
    )
    assert noxfile.lane_failures(lane) == [
        "tests (FAILED tests/a.py::test_one, ERROR tests/b.py::test_two, ERROR tests/c.py)",
        "tests_failover",
    ]
