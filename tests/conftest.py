"""Shared fixtures. The database under test comes from FLEETGATE_TEST_DATABASE_URL.

Unset, tests use a fresh SQLite file. A MariaDB or PostgreSQL URL names a *server*: every test
session creates its own database there (``fgt_<pid>_<random>``) and drops it afterwards, so runs
never collide. ``FLEETGATE_TEST_MARIADB_SNAPSHOT=on`` runs MariaDB sessions with
``innodb_snapshot_isolation=ON`` (the default regime of MariaDB >= 11.6.2).
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import structlog
from hypothesis import settings

from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.sql.ledger import SqlLedger
from tests.backends import create_database, drop_database, server_for

# Speed is the benchmarks' business: on a loaded 2-core machine one example can take longer than
# Hypothesis's 200 ms deadline, which fails a correct test as "flaky".
settings.register_profile("fleetgate", deadline=None)
settings.load_profile("fleetgate")


@dataclass(frozen=True)
class Backend:
    """The database a test session runs against."""

    url: str
    kind: str  # "sqlite" | "mariadb" | "postgres"
    session_variables: dict[str, str] = field(default_factory=dict)

    def ledger_options(self, **capacity: Any) -> dict[str, Any]:
        """Plain ledger options as the composition root would pass them."""
        return {
            "capacity": capacity,
            "claims": {"enforcement": "advisory"},
            "session_variables": dict(self.session_variables),
        }


@pytest.fixture(scope="session")
def backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    """The per-session database: a fresh SQLite file, or a fresh database on a server."""
    server_url = os.environ.get("FLEETGATE_TEST_DATABASE_URL", "")
    if not server_url or server_url.startswith("sqlite"):
        path = tmp_path_factory.mktemp("db") / "fleetgate.db"
        yield Backend(url=f"sqlite+aiosqlite:///{path}", kind="sqlite")
        return
    name = f"fgt_{os.getpid()}_{secrets.token_hex(3)}"
    url = create_database(server_url, name)
    server = server_for(server_url)
    try:
        yield Backend(url=url, kind=server.kind, session_variables=server.session_variables())
    finally:
        drop_database(server_url, name)


@pytest.fixture
def tmp_sqlite_url(tmp_path: Path) -> str:
    """A throwaway SQLite URL for tests that need their own file regardless of the backend."""
    return f"sqlite+aiosqlite:///{tmp_path / 'own.db'}"


@pytest.fixture
def clock() -> VirtualClock:
    """Virtual time, starting at ``tests.ledgers.START`` (a test module may define its own)."""
    from tests.ledgers import START  # tests.ledgers imports Backend from here

    return VirtualClock(START)


@pytest.fixture
async def ledger(backend: Backend, clock: VirtualClock) -> AsyncIterator[SqlLedger]:
    """A started SQL ledger on the database under test, every table empty, on ``clock``."""
    from tests.ledgers import open_ledger

    async with open_ledger(backend, clock) as opened:
        yield opened


@pytest.fixture
async def anyio_backend() -> AsyncIterator[str]:
    yield "asyncio"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that touches the database under test, so server sessions can select them.

    Tests that start database clusters (markers ``galera``, ``failover``) run only in the lanes
    that ask for them (``FLEETGATE_TEST_CLUSTERS=on``); elsewhere they are deselected, not
    skipped, and in those lanes a cluster that cannot start fails them.
    """
    for item in items:
        if "backend" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.backend)
    if os.environ.get("FLEETGATE_TEST_CLUSTERS", "").lower() in {"1", "on", "true"}:
        return
    clustered = [
        i for i in items if i.get_closest_marker("galera") or i.get_closest_marker("failover")
    ]
    if clustered:
        config.hook.pytest_deselected(items=clustered)
        items[:] = [i for i in items if i not in clustered]


@pytest.fixture(autouse=True)
def _logging_left_as_found() -> Iterator[None]:
    """A test that configures logging (a command's ``main``, an app's start-up) leaves the
    process as it found it: the root logger's handlers and level, and structlog's defaults.

    Otherwise whichever test ran before decides what the next one sees (tests run in random
    order): a client command run in-process would print httpx's INFO lines into its captured
    stderr, and ``capture_logs`` would miss a logger cached under the earlier configuration.
    """
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()
