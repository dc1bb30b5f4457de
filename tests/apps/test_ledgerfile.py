"""The strict reader of the ledger files: a snapshot, and a fleet file's ``fleet.ledger``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from fleetgate.apps.ledgerfile import (
    LedgerFileError,
    fleet_ledger_of,
    fleet_node_limits,
    snapshot_of,
)
from fleetgate.apps.simulate.fleet import parse_instant
from fleetgate.domain.capacity.dimensions import MAX_CPUS, Resources

NODE = {"name": "a", "pool": "p", "cpus": 12, "memoryMb": 16384, "diskGb": 100}
SIZE = {"cpus": 4, "memoryMb": 1024, "diskGb": 5}


def snap(**parts: Any) -> dict[str, Any]:
    return {"nodes": [NODE], **parts}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        # the misspelt key of issue 41: not 0 vCPU, but refused
        (snap(placements=[{"node": "a", "cpu": 4, "memoryMb": 1, "diskGb": 1}]),
         "placements[0].cpu: unknown key (expected node, cpus, memoryMb, diskGb, namespace, "
         "count)"),
        # a missing size is not 0 (a missing memoryMb gave a false hold)
        (snap(placements=[{"node": "a", "cpus": 4, "diskGb": 1}]),
         "placements[0].memoryMb: required"),
        ({"nodes": [{"name": "a", "cpus": 12, "diskGb": 1}]}, "nodes[0].memoryMb: required"),
        ({"nodes": [{**NODE, "cpus": -1}]}, "nodes[0].cpus: must be a whole number from 0"),
        ({"nodes": [{**NODE, "cpus": MAX_CPUS + 1}]}, f"to {MAX_CPUS}, got {MAX_CPUS + 1}"),
        ({"nodes": [{**NODE, "cpus": True}]}, "nodes[0].cpus: must be a whole number"),
        ({"nodes": [{**NODE, "memoryMb": "1Gi"}]}, "nodes[0].memoryMb: must be a whole number"),
        ({"nodes": [{**NODE, "zone": "x"}]}, "nodes[0].zone: unknown key"),
        ({"nodes": [NODE, NODE]}, "nodes[1].name: 'a' appears twice"),
        ({"nodes": [{**NODE, "schedulable": "no"}]}, "nodes[0].schedulable: must be true or false"),
        (snap(placements=[{"node": "x", **SIZE}]), "placements[0].node: 'x' is not one"),
        (snap(placements=[{"node": "a", **SIZE, "count": 0}]), "placements[0].count"),
        # above the node's limits: the item that crosses is named, with the total and the limit
        (snap(placements=[{"node": "a", **SIZE, "count": 3},
                          {"node": "a", **SIZE, "cpus": 1}]),
         "placements[1].cpus: puts node a at 13 vCPU"),
        (snap(placements=[{"node": "a", **SIZE, "count": 2},
                          {"node": "a", **SIZE, "count": 2}]),
         "placements[1].cpus: puts node a at 16 vCPU, above its limit of 12 vCPU"),
        (snap(placements=[{"node": "a", "cpus": 1, "memoryMb": 16385, "diskGb": 0}]),
         "placements[0].memoryMb: puts node a at 16385 MB, above its limit of 16384 MB"),
        (snap(claims=[{"namespace": "Bad_NS", **SIZE}]), "claims[0].namespace"),
        (snap(claims=[{"cpus": 1, "memoryMb": 1, "diskGb": 1}]), "claims[0].namespace: required"),
        (snap(claims=[{"namespace": "team", **SIZE, "count": 2}]), "claims[0].count: unknown"),
        ({"nodez": []}, "nodez: unknown key (expected nodes, placements, claims)"),
        ({}, "nodes: required"),
        ([], "must be a mapping"),
        (snap(placements={"a": []}), "placements: must be a list"),
    ],
)  # fmt: skip
def test_a_bad_snapshot_is_refused_in_one_line_naming_the_field(doc: object, message: str) -> None:
    with pytest.raises(LedgerFileError) as caught:
        snapshot_of(doc)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_node_filled_exactly_to_its_limits_is_accepted() -> None:
    full = {"node": "a", "namespace": "team", "cpus": 4, "memoryMb": 4096, "diskGb": 25}
    nodes, held, cluster = snapshot_of(snap(placements=[{**full, "count": 3}]))
    assert nodes[0].used == Resources(12, 12288, 75) and len(held["a"]) == 3
    assert [p.id for p in held["a"]] == ["placements[0]#0", "placements[0]#1", "placements[0]#2"]
    assert cluster.unclaimed_used == Resources(12, 12288, 75)


FLEET_NODES = ["a", "b"]


def fleet(**ledger: Any) -> object:
    return fleet_ledger_of(ledger, FLEET_NODES, parse_instant)


@pytest.mark.parametrize(
    ("ledger", "message"),
    [
        ({"nodes": {"a": {"placements": [{"cpu": 4, "memoryMb": 1, "diskGb": 1}]}}},
         "fleet.ledger.nodes.a.placements[0].cpu: unknown key"),
        ({"nodes": {"a": {"placements": [{"cpus": 4, "diskGb": 1}]}}},
         "fleet.ledger.nodes.a.placements[0].memoryMb: required"),
        # a 4-thread node offers 12 vCPU (3 a thread) and 16 GiB (4 a thread)
        ({"nodes": {"a": {"placements": [{**SIZE, "count": 4}]}}},
         "fleet.ledger.nodes.a.placements[0].cpus: puts node a at 16 vCPU, above its limit of 12"),
        ({"nodeCpu": 2, "nodes": {"b": {"placements": [{**SIZE, "count": 2}]}}},
         "fleet.ledger.nodes.b.placements[0].cpus: puts node b at 8 vCPU, above its limit of 6"),
        ({"nodes": {"a": {"cpus": 4}}}, "fleet.ledger.nodes.a.cpus: unknown key"),
        ({"nodes": {"a": {"cpu": 0}}}, "fleet.ledger.nodes.a.cpu: must be a whole number from 1"),
        ({"nodes": {"ghost": {}}}, "fleet.ledger.nodes.ghost: not a listed node"),
        ({"claims": [{"namespace": "team", "cpus": 4}]}, "fleet.ledger.claims[0].memoryMb"),
        ({"addNodes": [{"cpu": 4}]}, "fleet.ledger.addNodes[0].at: required"),
        ({"addNodes": [{"at": "2024-01-01T00:00:00Z", "cpus": 4}]},
         "fleet.ledger.addNodes[0].cpus: unknown key"),
        ({"spare": 1}, "fleet.ledger.spare: unknown key"),
        ({"gate": "off"}, "fleet.ledger.gate: must be true or false"),
        ({"nodes": {"a": {"workloadCpu": 5}}},
         "fleet.ledger.nodes.a.workloadCpu: must be a whole number from 0 to 4"),
    ],
)  # fmt: skip
def test_a_bad_fleet_ledger_is_refused_naming_the_field(
    ledger: dict[str, Any], message: str
) -> None:
    with pytest.raises(LedgerFileError) as caught:
        fleet(**ledger)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_the_same_placement_item_gets_the_same_answer_in_both_files() -> None:
    item = {"namespace": "team", "cpus": 4, "memoryMb": 1024, "diskGb": "5"}
    with pytest.raises(LedgerFileError) as in_snapshot:
        snapshot_of(snap(placements=[{"node": "a", **item}]))
    with pytest.raises(LedgerFileError) as in_fleet:
        fleet(nodes={"a": {"placements": [item]}})
    reason = "diskGb: must be a whole number from 0"
    assert reason in str(in_snapshot.value) and reason in str(in_fleet.value)


def test_a_fleet_ledger_is_read_with_its_defaults() -> None:
    read = fleet(
        nodes={"a": {"cpu": 8, "placements": [{**SIZE, "count": 6}]}, "b": {"workloadCpu": 0}},
        addNodes=[{"at": "2024-01-02T00:00:00Z"}],
    )
    assert read is not None and read.threads == {"a": 8} and read.node_threads == 4
    assert read.gate is True and read.workload_cpu == {"b": 0}
    (batch,) = read.placements["a"]
    assert batch.namespace == "default" and batch.count == 6 and batch.total().cpus == 24
    assert read.placements["b"] == ()
    assert read.add_nodes == ((datetime(2024, 1, 2, tzinfo=UTC), 4),)
    assert fleet_node_limits(8) == Resources(24, 32768, 100)
    assert fleet_ledger_of(None, FLEET_NODES, parse_instant) is None
