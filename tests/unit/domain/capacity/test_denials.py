"""Denial detail: the triple, the demand divergence (exceeded = used > limit), demand_only."""

from __future__ import annotations

import pytest
from hypothesis import given

from fleetgate.domain.capacity.denials import (
    Denial,
    DimensionDetail,
    Stage,
    deny,
    dimensions_of,
    over_limit,
)
from fleetgate.domain.capacity.guards import CLAIM_GUARD, CLUSTER_GUARD, node_guard
from tests.strategies import admit_params, node_guard_rows
from tests.unit.domain.capacity.rows import NODE_A, NODE_B, REQUEST


def by_name(denial: Denial) -> dict[str, DimensionDetail]:
    return {d.dimension: d for d in denial.dimensions}


def test_a_cpu_refusal_reports_the_charged_triple() -> None:
    denial = deny(node_guard(0.75), NODE_A, {**REQUEST, "cpus": 8})
    assert denial is not None and denial.stage is Stage.NODE
    dims = by_name(denial)
    assert (dims["cpus"].limit, dims["cpus"].used, dims["cpus"].requested) == (12, 8, 8)
    assert dims["cpus"].exceeded
    assert not dims["memory_mb"].exceeded and not dims["disk_gb"].exceeded
    assert denial.exceeded == {"cpus"} and not denial.demand_only


def test_a_busy_node_refuses_on_demand_alone() -> None:
    # Spec 9.1: node_b at load 50 -> demand (48, 50, 10, exceeded); demand_only.
    denial = deny(node_guard(0.75), NODE_B, REQUEST)
    assert denial is not None
    demand = by_name(denial)["demand"]
    assert (demand.limit, demand.used, demand.requested, demand.exceeded) == (48, 50, 10, True)
    assert demand.parts == {"cpu_load_1": 50.0, "expected_demand": 0.0}
    assert denial.exceeded == {"demand"} and denial.demand_only


def test_demand_exceeded_ignores_the_request_unlike_the_allocations() -> None:
    # The sfcbr pre-fix denial: used 9.36 <= limit 16.5 is NOT exceeded under phase 4a.
    row = {**NODE_B, "cpu_load_1": 9.36, "cpu_schedulable": 22}
    dims = {d.dimension: d for d in dimensions_of(node_guard(0.75), row, REQUEST)}
    assert dims["demand"].limit == pytest.approx(16.5)
    assert not dims["demand"].exceeded
    assert deny(node_guard(0.75), row, REQUEST) is None


def test_no_demand_dimension_without_schedulable_threads_or_target() -> None:
    row = {**NODE_A, "cpu_schedulable": None}
    assert "demand" not in {d.dimension for d in dimensions_of(node_guard(0.75), row, REQUEST)}
    assert "demand" not in {d.dimension for d in dimensions_of(node_guard(0.0), NODE_B, REQUEST)}


def test_a_cordoned_refusal_is_not_demand_only() -> None:
    denial = deny(node_guard(0.75), {**NODE_B, "schedulable": False}, REQUEST)
    assert denial is not None and denial.cordoned and not denial.demand_only
    assert denial.describe().startswith("node refused: node is cordoned")


def test_an_empty_exceeded_set_is_never_demand_only() -> None:
    assert not Denial(Stage.NODE, ()).demand_only


def test_demand_only_belongs_to_the_node_stage() -> None:
    demand = DimensionDetail("demand", 1.0, 2.0, 0.6, True)
    assert Denial(Stage.NODE, (demand,)).demand_only
    assert not Denial(Stage.CLUSTER, (demand,)).demand_only


def test_cluster_refusal_reports_total_minus_claimed() -> None:
    row = {}
    for d in ("cpus", "memory_mb", "disk_gb"):
        row |= {f"total_{d}": 76, f"claimed_{d}": 68, f"unclaimed_used_{d}": 0}
    denial = deny(CLUSTER_GUARD, row, REQUEST)
    assert denial is not None and denial.stage is Stage.CLUSTER
    assert by_name(denial)["cpus"].limit == 8


def test_over_limit_lists_only_the_dimensions_an_advisory_charge_overran() -> None:
    before = {"limit_cpus": 8, "used_cpus": 6, "limit_memory_mb": 8192, "used_memory_mb": 0,
              "limit_disk_gb": 100, "used_disk_gb": 0}  # fmt: skip
    over = over_limit(CLAIM_GUARD, before, REQUEST)
    assert [(d.dimension, d.limit, d.used, d.requested) for d in over] == [("cpus", 8, 6, 4)]


def test_describe_and_wire_form() -> None:
    denial = deny(node_guard(0.75), NODE_A, {**REQUEST, "cpus": 8})
    assert denial is not None
    assert denial.describe() == "node refused: cpus (limit 12, used 8, requested 8)"
    wire = denial.as_dict()
    assert wire["failing_stage"] == "node" and wire["demand_only"] is False
    assert wire["dimensions"][0] == {
        "dimension": "cpus", "limit": 12.0, "used": 8.0, "requested": 8.0, "exceeded": True,
    }  # fmt: skip


@given(node_guard_rows(), admit_params())
def test_a_refusal_always_names_what_refused_it(
    row: dict[str, object], params: dict[str, float | int]
) -> None:
    denial = deny(node_guard(float(params["target_load"])), row, params)
    if denial is not None:
        assert denial.cordoned or denial.exceeded
