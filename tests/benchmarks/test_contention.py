"""The contention benchmark runs end to end on SQLite (tiny: 4 writers, 100 admissions).

Not a performance test: it checks the table's columns, that every admission was answered and
that no placement was lost or doubled; no figure is compared with a speed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmarks.sizes import PROFILES
from benchmarks.targets import all_targets
from rich.console import Console

from benchmarks import contention


@pytest.mark.slow
async def test_a_tiny_contention_run_loses_and_doubles_nothing(tmp_path: Path) -> None:
    sqlite = [t for t in all_targets() if t.key == "sqlite"]
    console = Console(file=(tmp_path / "out.txt").open("w"))
    section = await contention.section(sqlite, PROFILES["tiny"], console)
    (table,) = section.tables
    assert table.columns == contention.COLUMNS
    assert [row[1] for row in table.rows] == ["none", "claims + reconcile"]
    for row in table.rows:
        cell = dict(zip(table.columns, row, strict=True))
        assert cell["backend"] == "SQLite" and cell["writers"] == "4"
        assert cell["admissions"] == "100", row
        assert cell["5xx"] == "0" and cell["lost"] == "0" and cell["doubled"] == "0", row
        assert float(cell["admissions/s"]) > 0 and float(cell["p99 ms"]) >= float(cell["p50 ms"])
    assert not section.findings


@pytest.mark.parametrize("writers", [4, 32])
def test_the_client_drops_an_idle_connection_well_before_the_server_does(writers: int) -> None:
    # A pooled connection the server may be closing must never be reused: with equal idle
    # limits (httpx's 5 s, uvicorn's 5 s) a release met a reset (httpx.ReadError, issue 45).
    # The client's idle clock starts after the server's, and a busy server may run its close
    # before reading a request that arrived meanwhile, so half the server's time is the least
    # margin asked for, not mere inequality.
    import uvicorn

    from benchmarks import http

    expiry = contention.limits(writers).keepalive_expiry
    server = uvicorn.Config(app="fleetgate.apps.api.server:worker_app").timeout_keep_alive
    assert server == http.SERVER_KEEP_ALIVE
    assert expiry is not None and expiry <= server / 2
