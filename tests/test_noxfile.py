"""noxfile.py's choice of database servers: the configured URL, else the machine's own server on
its standard port, else one the session starts on a reserved port and stops afterwards."""

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


@pytest.fixture
def nothing_served(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Standard URLs on ports nothing listens on, and no URL variable set."""
    ports = dict(zip(noxfile.SERVERS, free_ports(len(noxfile.SERVERS)), strict=True))
    for kind, (variable, default) in noxfile.SERVERS.items():
        monkeypatch.delenv(variable, raising=False)
        dead = default.replace(":3306/", f":{ports[kind]}/").replace(":5432/", f":{ports[kind]}/")
        monkeypatch.setitem(noxfile.SERVERS, kind, (variable, dead))
    return ports


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["mariadb", "postgres"])
def test_where_nothing_serves_the_standard_port_a_server_is_started_for_the_session(
    kind: str, nothing_served: dict[str, int]
) -> None:
    session = Session()
    variable = noxfile.SERVERS[kind][0]
    with noxfile.database_servers(session, kind) as urls:  # type: ignore[arg-type]
        assert list(urls) == [variable]
        assert noxfile.serves(urls[variable])
        assert f":{nothing_served[kind]}/" not in urls[variable]
        (logged,) = session.logged
        assert logged.startswith(
            f"nothing serves 127.0.0.1:{nothing_served[kind]}: {kind} started at {urls[variable]} ("
        )
    assert not noxfile.serves(urls[variable])


def test_a_url_in_the_environment_is_used_as_it_is(
    monkeypatch: pytest.MonkeyPatch, nothing_served: dict[str, int]
) -> None:
    monkeypatch.setenv("FLEETGATE_POSTGRES_URL", "postgresql+asyncpg://u@db.example:1/x")
    session = Session()
    with noxfile.database_servers(session, "postgres") as urls:  # type: ignore[arg-type]
        assert urls == {"FLEETGATE_POSTGRES_URL": "postgresql+asyncpg://u@db.example:1/x"}
    assert session.logged == []


def test_the_machines_own_server_is_used_where_it_serves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("FLEETGATE_MARIADB_URL", raising=False)
    monkeypatch.setattr(noxfile, "serves", lambda url: True)
    with noxfile.database_servers(Session(), "mariadb") as urls:  # type: ignore[arg-type]
        assert urls == {"FLEETGATE_MARIADB_URL": noxfile.SERVERS["mariadb"][1]}
