"""``fleetgate reconciler``: ``--once`` reports and exits by what it found; the real command's
loop serves its metrics and stops cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from fleetgate.adapters import plugins
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.adapters.sql.schema import nodes
from fleetgate.apps.container import build_container
from fleetgate.apps.reconciler import command
from fleetgate.apps.settings import load_settings
from fleetgate.apps.startup import StartupFailed
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.model import AdmitRequest, NodeSpec

FLEETGATE = Path(sys.executable).with_name("fleetgate")


def env(url: str, **extra: str) -> dict[str, str]:
    values = {k: v for k, v in os.environ.items() if not k.startswith("FLEETGATE_")}
    return {**values, "FLEETGATE_DATABASE_URL": url, "FLEETGATE_LOG_FORMAT": "json", **extra}


async def seed(url: str, drift: int) -> None:
    ledger = plugins.make_ledger(plugins.plugin_manager(), url, {}, None)
    assert isinstance(ledger, SqlLedger)
    await ledger.start()
    try:
        await ledger.add_node(NodeSpec("node-a", Capacity(4, 1024, 100)))
        await ledger.admit(AdmitRequest("web", "node-a", Resources(2, 100, 10)))
        if drift:
            async with ledger.store.engine.begin() as conn:
                await conn.execute(sa.update(nodes).values(used_cpus=nodes.c.used_cpus + drift))
    finally:
        await ledger.close()


def container_for(url: str) -> Any:
    return build_container(load_settings(database_url=url, log_format="json"))


async def test_once_corrects_drift_reports_it_and_exits_1_then_0(
    tmp_sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    await seed(tmp_sqlite_url, drift=3)
    assert await command.main(container_for(tmp_sqlite_url), once=True, interval=None) == 1
    first = capsys.readouterr().out
    assert "node-a" in first and "-3 / +0 / +0" in first
    assert await command.main(container_for(tmp_sqlite_url), once=True, interval=None) == 0
    assert "drifted nodes" in capsys.readouterr().out


def test_invalid_configuration_exits_2_naming_the_field(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FLEETGATE_RECONCILER__INTERVAL_SECONDS", "-1")
    assert command.run_reconciler(once=True, interval=None) == 2
    assert capsys.readouterr().err.startswith(
        "error: FLEETGATE_RECONCILER__INTERVAL_SECONDS (reconciler.interval_seconds): "
    )


async def test_an_unreachable_database_fails_to_start_naming_it() -> None:
    # cli.main prints the message as the one ``error:`` line, exit 1 (tests/apps/cli/test_main.py).
    url = "postgresql+asyncpg://nobody:pw-123456@127.0.0.1:1/none"
    with pytest.raises(StartupFailed, match=r"the ledger at .*nobody:\*\*\*@") as raised:
        await command.main(container_for(url), once=True, interval=None)
    assert "pw-123456" not in str(raised.value)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_loop_serves_metrics_and_stops_on_sigterm(tmp_sqlite_url: str) -> None:
    asyncio.run(seed(tmp_sqlite_url, drift=0))
    port = free_port()
    proc = subprocess.Popen(
        [str(FLEETGATE), "reconciler", "--interval", "0.05"],
        env=env(
            tmp_sqlite_url,
            FLEETGATE_RECONCILER__METRICS_HOST="127.0.0.1",
            FLEETGATE_RECONCILER__METRICS_PORT=str(port),
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        body = ""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                body = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=1).text
            except httpx.HTTPError:
                body = ""
            if 'fleetgate_capacity_node_used_cpus{node="node-a"} 2.0' in body and (
                "fleetgate_capacity_reconcile_passes_total 2.0" in body
                or "fleetgate_capacity_reconcile_passes_total 3.0" in body
                or "fleetgate_capacity_reconcile_passes_total 4.0" in body
            ):
                break
            time.sleep(0.1)
        assert 'fleetgate_capacity_node_used_cpus{node="node-a"} 2.0' in body, body
        assert "fleetgate_capacity_reconcile_last_success_timestamp_seconds" in body
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "reconciler stopped" in err


async def test_a_metrics_port_in_use_fails_to_start_naming_it(tmp_sqlite_url: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = int(taken.getsockname()[1])
        settings = load_settings(
            database_url=tmp_sqlite_url,
            reconciler={"metrics_host": "127.0.0.1", "metrics_port": port},
        )
        container = build_container(settings)
        with pytest.raises(StartupFailed, match=f"cannot serve the metrics on 127.0.0.1:{port}: "):
            await command.main(container, once=False, interval=None)
