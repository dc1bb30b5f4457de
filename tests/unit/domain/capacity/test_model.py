"""Ledger values: validation of names, requests and metrics; guard rows."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.model import (
    AdmitRequest,
    NodeMetrics,
    NodeSpec,
    NodeState,
    Placement,
    PlacementRequest,
    check_namespace,
    check_node_name,
    check_request_id,
    replay_mismatch,
)


@pytest.mark.parametrize("name", ["a", "node-1.example.com", "A_b", "x" * 253])
def test_valid_node_names(name: str) -> None:
    assert check_node_name(name) == name


@pytest.mark.parametrize("name", ["", "-a", "a-", "x" * 254, "a b", 3])
def test_invalid_node_names_name_the_field(name: object) -> None:
    with pytest.raises(ValueError, match=r"^node: "):
        check_node_name(name, "node")


@pytest.mark.parametrize("name", ["", "Team", "a" * 64, "a_b", "-a"])
def test_invalid_namespaces(name: str) -> None:
    with pytest.raises(ValueError, match=r"^namespace: "):
        check_namespace(name)


def test_request_ids() -> None:
    assert check_request_id(None) is None and check_request_id("job-1/2") == "job-1/2"
    for bad in ("", "a b", "x" * 129, "é"):
        with pytest.raises(ValueError, match=r"^request_id: "):
            check_request_id(bad)


def test_admit_request_validates_its_fields() -> None:
    with pytest.raises(ValueError, match=r"^demand: "):
        AdmitRequest("team", "a", Resources(), demand=-1.0)
    with pytest.raises(ValueError, match=r"^target_load: "):
        AdmitRequest("team", "a", Resources(), target_load=float("inf"))
    with pytest.raises(ValueError, match=r"^resources: "):
        AdmitRequest("team", "a", (1, 1, 1))  # type: ignore[arg-type]
    params = AdmitRequest("team", "a", Resources(1, 2, 3), demand=0.6, target_load=0.75)
    assert params.guard_params() == {
        "cpus": 1, "memory_mb": 2, "disk_gb": 3, "demand": 0.6, "target_load": 0.75,
    }  # fmt: skip


def test_placement_request_and_spec_validation() -> None:
    with pytest.raises(ValueError, match=r"^pool: "):
        PlacementRequest("team", Resources(), pool="p" * 300)
    with pytest.raises(ValueError, match=r"^labels: "):
        NodeSpec("a", Capacity(1, 1, 1), labels={"k": 1})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match=r"^cpu_schedulable: "):
        NodeMetrics(cpu_schedulable=-1)
    with pytest.raises(ValueError, match=r"^cpu_load_1: "):
        NodeMetrics(cpu_load_1=-0.5)


def test_a_node_state_exposes_the_guard_columns() -> None:
    state = NodeState(
        name="a", pool="", labels={}, capacity=Capacity(4, 100, 10),
        limits=Resources(12, 100, 10), used=Resources(1, 2, 3), expected_demand=0.6,
        metrics=NodeMetrics(0.5, 4), schedulable=True,
        updated_at=datetime(2026, 1, 1, tzinfo=UTC),
    )  # fmt: skip
    assert state.guard_row() == {
        "expected_demand": 0.6, "cpu_load_1": 0.5, "cpu_schedulable": 4, "schedulable": True,
        "limit_cpus": 12, "limit_memory_mb": 100, "limit_disk_gb": 10,
        "used_cpus": 1, "used_memory_mb": 2, "used_disk_gb": 3,
    }  # fmt: skip


def test_a_replay_mismatch_names_each_recorded_field_that_differs() -> None:
    placed = Placement(
        "p-1", "ci", "hv-1", Resources(2, 1024, 10), 1.2, datetime(2026, 1, 1, tzinfo=UTC), "r-1"
    )
    same = PlacementRequest("ci", Resources(2, 1024, 10), request_id="r-1")
    assert replay_mismatch(placed, same) == ()
    assert (
        replay_mismatch(placed, PlacementRequest("ci", Resources(2, 1024, 10), node="hv-1")) == ()
    )
    assert replay_mismatch(placed, PlacementRequest("ci", Resources(3, 1024, 9))) == (
        "cpus",
        "disk_gb",
    )
    assert replay_mismatch(placed, PlacementRequest("ci", Resources(2, 1024, 10), node="hv-2")) == (
        "node",
    )
