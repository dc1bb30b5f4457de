"""The capacity-aware simulation: placements per node, the node sync and the ledger gate."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from fleetgate.apps.simulate.fleet import FleetError, load_fleet
from tests.apps.simulate.capacity_examples import (
    EXAMPLES,
    GOLDEN,
    PLACEHOLDER_ON_A_NODE_THAT_EXISTED,
    SCENARIOS,
    example,
    run_document,
    scenario,
)
from tests.strategies import SIM_START


def _kinds(doc: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [e for e in doc["events"] if e["type"] == kind]


def test_the_example_decides_what_its_golden_file_pins() -> None:
    assert example() == json.loads(GOLDEN.read_text(encoding="utf-8"))


def test_the_example_drains_each_node_once_its_surge_is_in_the_ledger() -> None:
    """The oldest node's placements fit no other node now: it starts on its surge (the pool
    launches 24-vCPU nodes), whose drain waits until the surge has joined the ledger."""
    doc = example()
    starts = [e["node"] for e in _kinds(doc, "rotation-start")]
    assert starts[:3] == ["big-1", "small-1", "small-2"]  # then their replacements, in turn
    assert not _kinds(doc, "held-for-capacity") and not _kinds(doc, "rotation-failed")
    ledger = doc["ledger"]
    assert ledger["placements"] == 11 and ledger["relocated"] >= 11
    assert ledger["strandedAtMost"] == ledger["strandedAtEnd"] == ledger["lost"] == 0
    assert doc["summary"]["breaches"] == 0 and doc["diagnostics"] == []


HELD_UNTIL_ADDED = f"""
fleet:
  pool: workers
  labels: {{fleetgate.io/rotate: "true"}}
  expireAfter: 14d
  terminationGracePeriod: 1h
  nodes:
    - {{name: big-1, createdAt: "2023-12-20T08:00:00Z"}}
    - {{name: small-1, createdAt: "{SIM_START.isoformat()}"}}
    - {{name: small-2, createdAt: "{SIM_START.isoformat()}"}}
  ledger:
    nodeCpu: 4
    nodes:
      big-1: {{cpu: 8, placements: [{{cpus: 4, memoryMb: 1024, diskGb: 5, count: 5}}]}}
      small-1: {{placements: [{{cpus: 4, memoryMb: 1024, diskGb: 5, count: 3}}]}}
      small-2: {{placements: [{{cpus: 4, memoryMb: 1024, diskGb: 5, count: 3}}]}}
    addNodes: [{{at: "2024-01-02T18:30:00Z", cpu: 4}}]
"""


def test_a_drain_is_held_while_the_surge_is_too_small_then_rotates_once_a_node_is_added() -> None:
    """The pool launches 12-vCPU nodes: big-1's surge joins the ledger, but 8 of its 20 vCPU
    still have nowhere to go. The drain is held (the event), the attempt fails at readyTimeout
    and is retried; once an operator adds a node the retry drains it, nothing stranded."""
    doc = run_document(yaml.safe_load(HELD_UNTIL_ADDED), days=3)
    held = _kinds(doc, "held-for-capacity")
    (added,) = _kinds(doc, "node-added")
    starts = _kinds(doc, "rotation-start")
    assert held and held[0]["node"] == "big-1" and held[0]["at"] < added["at"]
    assert _kinds(doc, "rotation-failed")  # the held attempts end at readyTimeout
    assert starts[-1]["node"] == "big-1" and starts[-1]["at"] > added["at"]
    ledger = doc["ledger"]
    assert ledger["heldPasses"] > 0 and ledger["relocated"] == 5
    assert ledger["strandedAtMost"] == ledger["lost"] == ledger["strandedAtEnd"] == 0
    assert doc["summary"]["breaches"] == 0


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_issue_41s_scenarios_strand_nothing_with_the_gate_and_strand_without_it(
    name: str,
) -> None:
    """The gate is what keeps them from stranding: off (``fleet.ledger.gate: false``), the same
    run drains blind and strands placements; on, nothing is stranded at any sync."""
    on, off = scenario(name, gate=True), scenario(name, gate=False)
    assert on["ledger"]["strandedAtMost"] == 0 and on["ledger"]["lost"] == 0
    assert _kinds(on, "held-for-capacity"), "the gate held nothing: the scenario tests nothing"
    assert off["ledger"]["strandedAtMost"] > 0 and off["ledger"]["lost"] == 0
    assert not _kinds(off, "held-for-capacity")
    assert on["ledger"]["relocated"] == off["ledger"]["relocated"]  # all moved in the end


HELD_TO_EXPIRY = PLACEHOLDER_ON_A_NODE_THAT_EXISTED.replace(
    '- {name: spare, createdAt: "2023-12-31T08:00:00Z"}',
    '- {name: spare, createdAt: "2023-12-20T09:00:00Z"}',
).replace('    addNodes: [{at: "2024-01-02T18:30:00Z", cpu: 8}]\n', "")


def test_a_hold_that_meets_the_forced_expiry_is_a_finding_and_each_breach_counts_once() -> None:
    """No room ever comes: big-1 and spare are held until Karpenter force-expires them (the
    gate's one limit, CapacityHoldMeetsExpiry each). big-1's workload moves onto spare before
    spare expires: spare carries two slots' workloads, yet its breach is counted once."""
    doc = run_document(yaml.safe_load(HELD_TO_EXPIRY), days=4)
    breaches = _kinds(doc, "expire-after-breach")
    assert sorted(e["node"] for e in breaches) == ["big-1", "spare"]
    assert doc["summary"]["breaches"] == 2 == doc["summary"]["breachedNodes"]
    found = [d for d in doc["diagnostics"] if d["code"] == "CapacityHoldMeetsExpiry"]
    assert sorted(d["message"].split()[1].rstrip(",") for d in found) == ["big-1", "spare"]
    assert all(d["severity"] == "warning" and "add a node" in d["message"] for d in found)


def test_a_node_still_held_at_the_end_is_warned_of_its_coming_expiry() -> None:
    doc = run_document(yaml.safe_load(HELD_TO_EXPIRY), days=2)
    found = {d["message"].split()[1].rstrip(","): d["message"] for d in doc["diagnostics"]
             if d["code"] == "CapacityHoldMeetsExpiry"}  # fmt: skip
    assert sorted(found) == ["big-1", "spare"]
    assert "still unrotated at the end" in found["big-1"]
    assert "force-expires it at 2024-01-03T08:00:00Z" in found["big-1"]


def test_without_ledger_placements_the_report_has_no_ledger_part() -> None:
    document = yaml.safe_load((EXAMPLES / "fleet-listed.yaml").read_text(encoding="utf-8"))
    doc = run_document(document, days=2)
    assert "ledger" not in doc
    assert not {"held-for-capacity", "relocated", "node-added"} & {e["type"] for e in doc["events"]}


@pytest.mark.parametrize(
    ("ledger", "message"),
    [
        ({"nodes": {"ghost": {}}}, "fleet.ledger.nodes.ghost: not a listed node"),
        ({"nodes": {"a": {"cpu": 0}}}, "fleet.ledger.nodes.a.cpu: must be a whole number from 1"),
        (
            {"nodes": {"a": {"placements": [{"cpus": -1, "memoryMb": 1, "diskGb": 1}]}}},
            "fleet.ledger.nodes.a.placements[0].cpus",
        ),
        ({"enforcement": "strict"}, "fleet.ledger.enforcement"),
        ({"addNodes": [{"cpu": 4}]}, "fleet.ledger.addNodes[0].at: required"),
        (
            {"claims": [{"namespace": "Bad", "cpus": 1, "memoryMb": 1, "diskGb": 1}]},
            "fleet.ledger.claims[0].namespace",
        ),
        ({"spare": 1}, "fleet.ledger.spare: unknown key"),
        (
            {"nodes": {"a": {"placements": [{"cpus": 13, "memoryMb": 1, "diskGb": 1}]}}},
            "fleet.ledger.nodes.a.placements[0].cpus: puts node a at 13 vCPU, above its limit",
        ),
    ],
)
def test_a_bad_ledger_section_names_the_field(ledger: dict[str, Any], message: str) -> None:
    document = {
        "fleet": {
            "expireAfter": "14d",
            "nodes": [{"name": "a", "createdAt": "2023-12-20T08:00:00Z"}],
            "ledger": ledger,
        }
    }
    with pytest.raises(FleetError) as caught:
        load_fleet(document, SIM_START)
    assert message in str(caught.value)


def test_the_ledger_section_is_read_into_the_fleet() -> None:
    document = yaml.safe_load((EXAMPLES / "fleet-ledger.yaml").read_text(encoding="utf-8"))
    fleet = load_fleet(document, SIM_START)
    assert fleet.ledger is not None and fleet.ledger.node_threads == 8
    assert fleet.ledger.threads == {"big-1": 8, "small-1": 4, "small-2": 4}
    assert sum(b.count for b in fleet.ledger.placements["big-1"]) == 5
    assert fleet.ledger.claims[0][0] == "team" and fleet.ledger.enforcement == "advisory"
