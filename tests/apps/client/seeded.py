"""A real ``fleetgate api`` (uvicorn on 127.0.0.1, over a SQLite file) seeded through the typed
client, and the ``fleetgate`` command run against it: what the client's command tests share."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest
from click.testing import CliRunner, Result

from fleetgate.apps.api.schemas import PlacementCreate
from fleetgate.apps.cli.main import fleetgate
from fleetgate.client import FleetgateClient
from tests.servers import FLEETGATE, running_api

ADMIN_TOKEN = "client-cli-admin-token"
NS = "team-a"


def size(cpus: int, memory_mb: int, disk_gb: int, **where: str) -> PlacementCreate:
    """A placement request, as the API's own schema."""
    return PlacementCreate(cpus=cpus, memory_mb=memory_mb, disk_gb=disk_gb, **where)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One running API for the module, with two nodes, a claim and two placements."""
    db = tmp_path_factory.mktemp("client") / "api.db"
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
    return CliRunner().invoke(fleetgate, list(args), env={**unset, "COLUMNS": "200", **(env or {})})


def console(
    *args: str, env: dict[str, str] | None = None, script: str = "fleetgate"
) -> subprocess.CompletedProcess[str]:
    """The installed console script (``fleetgate``, or ``kubectl-fleetgate``) in a process of
    its own, with ``env`` and no ``FLEETGATE_*`` variable from outside."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FLEETGATE_")}
    return subprocess.run([str(FLEETGATE.with_name(script)), *args],
                          env={**clean, "COLUMNS": "200", **(env or {})},
                          capture_output=True, text=True, timeout=120)  # fmt: skip
