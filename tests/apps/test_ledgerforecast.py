"""``fleetgate check --ledger-snapshot | --ledger``: each pool's headroom, largest node first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from fleetgate.apps.cli.main import fleetgate
from fleetgate.apps.ledgerforecast import SnapshotError, read_ledger, snapshot_of
from fleetgate.apps.services.relocation import RelocationCheck
from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.headroom import LEDGER_HEADROOM, headroom
from fleetgate.domain.capacity.model import AdmitRequest, NodeSpec
from tests.conftest import Backend
from tests.ledgers import open_ledger

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = ROOT / "examples" / "ledger-snapshot.yaml"
POLICY = ROOT / "examples" / "policy-weekly.yaml"


def check(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        fleetgate, ["check", str(POLICY), "--expire-after", "14d", *map(str, args)]
    )
    return result.exit_code, result.stdout, result.stderr


def test_the_example_snapshot_holds_the_pool_whose_largest_node_would_strand() -> None:
    code, out, _ = check("--ledger-snapshot", SNAPSHOT, "--format", "json")
    assert code == 0  # a warning; --strict makes it fail
    ledger = json.loads(out)["ledger"]
    pools = {p["pool"]: p for p in ledger["pools"]}
    assert pools["batch"]["fits"] and not pools["general"]["fits"]
    assert pools["general"]["largest"] == "big-1"
    assert pools["general"]["verdict"]["missing"] == {"cpus": 8, "memory_mb": 0, "disk_gb": 0}
    assert [f["code"] for f in ledger["findings"]] == [LEDGER_HEADROOM]
    assert "add a node" in ledger["findings"][0]["message"]
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


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"nodes": [{"name": "a", "cpus": -1}]}, "nodes[0].cpus: must be a whole number >= 0"),
        ({"nodes": [{"name": "a"}, {"name": "a"}]}, "nodes[1].name: 'a' appears twice"),
        ({"nodes": [], "placements": [{"node": "x"}]}, "placements[0].node: 'x' is not one"),
        ({"nodes": [{"name": "a"}], "placements": [{"node": "a", "count": 0}]}, "count"),
        ({"claims": [{"namespace": "Bad_NS"}]}, "claims[0].namespace"),
        ({"nodez": []}, "nodez: unknown key"),
    ],
)
def test_a_bad_snapshot_exits_2_naming_the_field(
    tmp_path: Path, doc: dict[str, object], message: str
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    code, _, err = check("--ledger-snapshot", bad)
    assert code == 2 and message in err and f"--ledger-snapshot {bad}" in err
    with pytest.raises(SnapshotError, match=r"unknown key|must|twice|not one|namespace"):
        snapshot_of(doc)


def test_both_sources_at_once_are_refused() -> None:
    code, _, err = check("--ledger-snapshot", SNAPSHOT, "--ledger", "sqlite+aiosqlite:///x.db")
    assert code == 2 and "give one of them" in err


def test_the_snapshot_derives_the_cluster_row_as_the_ledger_keeps_it() -> None:
    nodes, held, cluster = snapshot_of(yaml.safe_load(SNAPSHOT.read_text()))
    assert cluster.total == Resources(60, 81920, 400)
    assert cluster.claimed == Resources(20, 10240, 100)
    assert cluster.unclaimed_used == Resources(24, 6144, 30)  # web's, which has no claim
    assert {n.name: n.used.cpus for n in nodes} == {
        "big-1": 20, "small-1": 12, "small-2": 12, "batch-1": 12
    }  # fmt: skip
    assert len(held["big-1"]) == 5


async def test_the_ledger_forecast_is_the_gates_verdict_on_the_largest_node(
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
        assert pool.pool == "general" and pool.largest == "big" and not pool.fits
        assert pool.verdict is not None and pool.verdict.shortfall().cpus == 3
        verdicts = await RelocationCheck(ledger).judge_nodes(["big", "s1"])
        assert verdicts["big"] == pool.verdict and verdicts["s1"].fits
        # The same judgement from the nodes and placements alone (what a snapshot file holds).
        nodes = await ledger.nodes()
        placements = {n.name: await ledger.placements(node=n.name) for n in nodes}
        again = headroom(nodes, placements, await ledger.cluster(), DemandPolicy())
        assert again == [pool]
