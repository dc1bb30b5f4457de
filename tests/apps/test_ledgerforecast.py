"""``fleetgate check --ledger-snapshot | --ledger``: every node of every pool judged."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from fleetgate.apps.cli import app
from fleetgate.apps.ledgerfile import snapshot_of
from fleetgate.apps.ledgerforecast import read_ledger
from fleetgate.apps.services.relocation import RelocationCheck
from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.headroom import (
    CAPACITY_HOLD_MEETS_EXPIRY,
    LEDGER_HEADROOM,
    headroom,
)
from fleetgate.domain.capacity.model import AdmitRequest, NodeSpec
from tests.conftest import Backend
from tests.ledgers import open_ledger
from tests.servers import FLEETGATE

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = ROOT / "examples" / "ledger-snapshot.yaml"
POLICY = ROOT / "examples" / "policy-weekly.yaml"


def check(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        app, ["check", str(POLICY), "--expire-after", "14d", *map(str, args)]
    )
    return result.exit_code, result.stdout, result.stderr


def test_the_example_snapshot_holds_the_pool_whose_big_node_would_strand() -> None:
    code, out, _ = check("--ledger-snapshot", SNAPSHOT, "--format", "json")
    assert code == 0  # a warning; --strict makes it fail
    ledger = json.loads(out)["ledger"]
    pools = {p["pool"]: p for p in ledger["pools"]}
    assert pools["batch"]["fits"] and not pools["general"]["fits"]
    assert pools["general"]["held"] == ["big-1"]
    verdicts = {v["node"]: v for v in pools["general"]["verdicts"]}
    assert set(verdicts) == {"big-1", "small-1", "small-2"}  # every node holding placements
    assert verdicts["small-1"]["fits"] and verdicts["small-2"]["fits"]
    assert verdicts["big-1"]["missing"] == {"cpus": 8, "memory_mb": 0, "disk_gb": 0}
    codes = [f["code"] for f in ledger["findings"]]
    assert codes == [LEDGER_HEADROOM, CAPACITY_HOLD_MEETS_EXPIRY]
    assert all("add a node" in f["message"] for f in ledger["findings"])
    assert "expireAfter 14d" in ledger["findings"][1]["message"]
    # A pool whose nodes never expire meets no forced expiry.
    never = CliRunner().invoke(
        app, ["check", str(POLICY), "--expire-after", "Never", "--ledger-snapshot", str(SNAPSHOT),
              "--format", "json"],
    )  # fmt: skip
    codes = [f["code"] for f in json.loads(never.stdout)["ledger"]["findings"]]
    assert codes == [LEDGER_HEADROOM]
    code, out, _ = check("--ledger-snapshot", SNAPSHOT, "-o", "name")
    assert LEDGER_HEADROOM in out.split()
    assert check("--ledger-snapshot", SNAPSHOT, "--strict")[0] == 1


def test_without_the_option_the_report_has_no_ledger_part() -> None:
    _, out, _ = check("--format", "json")
    assert "ledger" not in json.loads(out)


def test_a_roomy_snapshot_has_no_finding(tmp_path: Path) -> None:
    doc = yaml.safe_load(SNAPSHOT.read_text())
    doc["nodes"].append(
        {"name": "spare", "pool": "general", "cpus": 12, "memoryMb": 16384, "diskGb": 100}
    )
    roomy = tmp_path / "roomy.yaml"
    roomy.write_text(yaml.safe_dump(doc))
    code, out, _ = check("--ledger-snapshot", roomy, "--format", "json")
    assert json.loads(out)["ledger"]["findings"] == [] and code == 0


def test_a_small_node_with_one_oversized_placement_is_found(tmp_path: Path) -> None:
    """Issue 41: not only the node using the most CPU is judged. ``big`` uses the most and its
    small placements fit elsewhere; ``small``'s one 10-vCPU placement fits no other node (8 vCPU
    free at most, and the pool's smallest node, hence any surge, offers 6)."""
    two = {"namespace": "team", "cpus": 2, "memoryMb": 512, "diskGb": 1, "count": 8}
    doc = {
        "nodes": [
            {"name": "big", "pool": "p", "cpus": 24, "memoryMb": 32768, "diskGb": 100},
            {"name": "small", "pool": "p", "cpus": 12, "memoryMb": 32768, "diskGb": 100},
            {"name": "mini", "pool": "p", "cpus": 6, "memoryMb": 32768, "diskGb": 100},
            *({"name": f"spare-{i}", "pool": "q", "cpus": 24, "memoryMb": 32768, "diskGb": 100}
              for i in range(3)),
        ],
        "placements": [
            {"node": "big", **two},
            *({"node": f"spare-{i}", **two} for i in range(3)),
            {"node": "small", "namespace": "team", "cpus": 10, "memoryMb": 512, "diskGb": 1},
        ],
    }  # fmt: skip
    path = tmp_path / "snapshot.yaml"
    path.write_text(yaml.safe_dump(doc))
    code, out, _ = check("--ledger-snapshot", path, "--format", "json")
    ledger = json.loads(out)["ledger"]
    pools = {p["pool"]: p for p in ledger["pools"]}
    assert pools["p"]["held"] == ["small"] and pools["q"]["fits"] and code == 0
    assert {v["node"] for v in pools["p"]["verdicts"]} == {"big", "small"}
    finding, expiry = ledger["findings"]
    assert "draining node small would strand 1 of 1 placement(s)" in finding["message"]
    assert expiry["code"] == CAPACITY_HOLD_MEETS_EXPIRY and "node small" in expiry["message"]
    code, out, _ = check("--ledger-snapshot", path)
    assert "HELD" in out and "node small" in out


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nodes: [{name: a, pool: p, cpu: 4, memoryMb: 1, diskGb: 1}]\n",
         "nodes[0].cpu: unknown key"),
        ("nodes: [{name: a, pool: p, cpus: 4, diskGb: 1}]\n", "nodes[0].memoryMb: required"),
        ("nodes:\n  - {name: a, cpus: 4\n  - {name: b}\n", "invalid YAML at line 3, column 5"),
    ],
)  # fmt: skip
def test_a_bad_snapshot_exits_2_in_one_line_naming_the_field(
    tmp_path: Path, text: str, message: str
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    code, out, err = check("--ledger-snapshot", bad)
    assert code == 2 and out == ""
    assert message in err and f"--ledger-snapshot {bad}" in err
    assert len(err.strip().splitlines()) == 1


def test_both_sources_at_once_are_refused() -> None:
    code, _, err = check("--ledger-snapshot", SNAPSHOT, "--ledger", "sqlite+aiosqlite:///x.db")
    assert code == 2 and "give one of them" in err


def test_the_snapshot_derives_the_cluster_row_as_the_ledger_keeps_it() -> None:
    nodes, held, cluster = snapshot_of(yaml.safe_load(SNAPSHOT.read_text()))
    assert cluster.total == Resources(72, 98304, 500)
    assert cluster.claimed == Resources(20, 10240, 100)
    assert cluster.unclaimed_used == Resources(24, 6144, 30)  # web's, which has no claim
    assert {n.name: n.used.cpus for n in nodes} == {
        "big-1": 20, "small-1": 12, "small-2": 12, "spare-1": 0, "batch-1": 12
    }  # fmt: skip
    assert len(held["big-1"]) == 5


async def test_the_ledger_forecast_is_the_gates_verdict_on_every_node(
    backend: Backend,
) -> None:
    async with open_ledger(backend) as ledger:
        for name, threads in (("big", 8), ("s1", 4), ("s2", 4)):
            await ledger.add_node(NodeSpec(name, Capacity(threads, 16384, 100), "general"))
        for node, count in (("big", 5), ("s1", 4), ("s2", 4)):
            for _ in range(count):
                made = await ledger.admit(AdmitRequest("team", node, Resources(3, 512, 5)))
                assert made.placement is not None
        (pool,) = await read_ledger(ledger, DemandPolicy())
        # No surge is counted: s1 and s2 are full, big has 9 vCPU free.
        assert pool.pool == "general" and [v.node for v in pool.held] == ["big", "s1", "s2"]
        assert [v.shortfall().cpus for v in pool.held] == [15, 3, 3]
        verdicts = await RelocationCheck(ledger).judge_nodes(["big", "s1", "s2"])
        assert tuple(verdicts[v.node] for v in pool.verdicts) == pool.verdicts
        # The same judgement from the nodes and placements alone (what a snapshot file holds).
        nodes = await ledger.nodes()
        placements = {n.name: await ledger.placements(node=n.name) for n in nodes}
        again = headroom(nodes, placements, await ledger.cluster(), DemandPolicy())
        assert again == [pool]


@pytest.mark.parametrize("source", ["--ledger-snapshot", "--ledger"])
def test_the_forecast_reads_the_configured_capacity_settings_validated(
    source: str, tmp_path: Path
) -> None:
    # The real command: a bad FLEETGATE_CAPACITY__* is refused naming it where the forecast
    # reads it (issue 42), never ignored (the snapshot used the defaults) nor a pydantic dump.
    target = (
        str(SNAPSHOT) if source == "--ledger-snapshot" else f"sqlite+aiosqlite:///{tmp_path}/l.db"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETGATE_")}
    out = subprocess.run(
        [str(FLEETGATE), "check", str(POLICY), "--expire-after", "14d", source, target],
        env={**env, "FLEETGATE_CAPACITY__TARGET_LOAD": "abc"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip() == (
        "error: FLEETGATE_CAPACITY__TARGET_LOAD (capacity.target_load): "
        "must be a number of at least 0, got 'abc'"
    )
    assert not (tmp_path / "l.db").exists()  # refused before the database was opened
