"""The capacity-aware simulation: placements per node, the node sync and the ledger gate."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from fleetgate.apps.simulate.fleet import FleetError, load_fleet
from tests.apps.simulate.capacity_examples import EXAMPLES, GOLDEN, example, run_document
from tests.strategies import SIM_START


def _kinds(doc: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [e for e in doc["events"] if e["type"] == kind]


def test_the_example_decides_what_its_golden_file_pins() -> None:
    assert example() == json.loads(GOLDEN.read_text(encoding="utf-8"))


def test_the_example_skips_the_node_without_room_and_rotates_it_once_room_appears() -> None:
    doc = example()
    starts = [e["node"] for e in _kinds(doc, "rotation-start")]
    held = _kinds(doc, "held-for-capacity")
    assert held[0]["node"] == "big-1" and held[0]["at"] == _kinds(doc, "rotation-start")[0]["at"]
    assert starts[0] == "small-1" and "big-1" in starts  # the oldest went second
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


def test_a_pool_is_held_with_the_gate_until_a_node_is_added_then_rotates() -> None:
    doc = run_document(yaml.safe_load(HELD_UNTIL_ADDED), days=3)
    gates = [e for e in _kinds(doc, "blocked-by-gate") if e["gate"] == "ledgerCapacity"]
    assert gates and gates[0]["until"] is None
    (added,) = _kinds(doc, "node-added")
    big = [e for e in _kinds(doc, "rotation-start") if e["node"] == "big-1"]
    assert big and big[0]["at"] == added["at"] > gates[0]["at"]  # the same pass: no waiting
    assert all(e["type"] != "rotation-failed" for e in doc["events"])
    ledger = doc["ledger"]
    assert ledger["heldPasses"] > 0
    assert ledger["strandedAtMost"] == ledger["lost"] == ledger["strandedAtEnd"] == 0
    assert doc["summary"]["breaches"] == 0


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
