"""The composition root picks adapters through the plugins by configuration."""

from __future__ import annotations

from fleetgate.apps.container import build_container
from fleetgate.apps.settings import Settings
from fleetgate.domain.ports import Clock


def test_the_container_builds_the_configured_adapters(tmp_sqlite_url: str) -> None:
    c = build_container(Settings(database_url=tmp_sqlite_url, cluster="fake"))
    ledger, cluster = c.ledger(), c.cluster()
    assert type(ledger).__module__.startswith("fleetgate.adapters.sql")
    assert type(cluster).__module__.startswith("fleetgate.adapters.fakecluster")
    assert isinstance(c.clock(), Clock)
    # Singletons: one ledger per process.
    assert c.ledger() is ledger


def test_overrides_replace_a_provider() -> None:
    marker = object()
    c = build_container(Settings(), cluster=marker)
    assert c.cluster() is marker
