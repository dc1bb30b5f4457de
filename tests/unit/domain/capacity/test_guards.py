"""The guards as data: their shape, and the Python evaluator's SQL-like three-valued logic."""

from __future__ import annotations

from hypothesis import given

from fleetgate.domain.capacity.guards import (
    CLAIM_GUARD,
    CLUSTER_GUARD,
    DEMAND,
    DEMAND_CLAUSE,
    SCHEDULABLE,
    AnyOf,
    AtMost,
    Coalesce,
    Column,
    Const,
    IsNull,
    Param,
    evaluate,
    node_guard,
    truth_of,
    value_of,
)
from tests.strategies import admit_params, node_guard_rows
from tests.unit.domain.capacity.rows import NODE_A, REQUEST


def test_the_node_guard_names_its_predicates_in_order() -> None:
    names = [name for name, _ in node_guard(0.75).tests()]
    assert names == [SCHEDULABLE, "cpus", "memory_mb", "disk_gb", DEMAND]


def test_a_non_positive_target_load_drops_the_demand_clause() -> None:
    for target in (0.0, -0.5):
        assert DEMAND not in [name for name, _ in node_guard(target).tests()]


def test_the_spec_fixture_fits_exactly_and_one_more_vcpu_does_not() -> None:
    assert evaluate(node_guard(0.75), NODE_A, REQUEST).passed  # 8 + 4 <= 12: matched, not changed
    assert evaluate(node_guard(0.75), NODE_A, {**REQUEST, "cpus": 5}).failed == ("cpus",)


def test_the_demand_clause_tests_existing_state_not_the_request() -> None:
    # Phase 4a: an idle node admits however large the incoming charge is.
    idle = {**NODE_A, "cpu_load_1": 0.0, "cpu_schedulable": 1}
    assert evaluate(node_guard(0.75), idle, {**REQUEST, "cpus": 0, "demand": 1000.0}).passed
    busy = {**NODE_A, "cpu_load_1": 50.0, "expected_demand": 0.0}
    assert evaluate(node_guard(0.75), busy, REQUEST).failed == (DEMAND,)


def test_the_demand_boundary_is_inclusive() -> None:
    at_budget = {**NODE_A, "cpu_load_1": 1.0, "expected_demand": 2.0, "cpu_schedulable": 4}
    assert evaluate(node_guard(0.75), at_budget, REQUEST).passed  # 3.0 <= 0.75 x 4


def test_unknown_schedulable_threads_pass_the_demand_clause() -> None:
    row = {**NODE_A, "cpu_schedulable": None, "cpu_load_1": 1000.0}
    assert evaluate(node_guard(0.75), row, REQUEST).passed


def test_unknown_load_counts_as_zero() -> None:
    row = {**NODE_A, "cpu_load_1": None, "expected_demand": 3.0, "cpu_schedulable": 4}
    assert evaluate(node_guard(0.75), row, REQUEST).passed
    assert not evaluate(node_guard(0.7), row, {**REQUEST, "target_load": 0.7}).passed


def test_a_cordoned_node_refuses_on_the_flag() -> None:
    assert evaluate(node_guard(0.75), {**NODE_A, "schedulable": False}, REQUEST).failed == (
        SCHEDULABLE,
    )


def test_the_cluster_guard_is_unclaimed_used_plus_x_within_total_minus_claimed() -> None:
    row = {"total_cpus": 76, "claimed_cpus": 0, "unclaimed_used_cpus": 72}
    for d in ("memory_mb", "disk_gb"):
        row |= {f"total_{d}": 10**6, f"claimed_{d}": 0, f"unclaimed_used_{d}": 0}
    assert evaluate(CLUSTER_GUARD, row, REQUEST).passed  # 72 + 4 <= 76 - 0
    row["claimed_cpus"] = 1
    assert evaluate(CLUSTER_GUARD, row, REQUEST).failed == ("cpus",)


def test_the_claim_guard_is_used_plus_x_within_limit() -> None:
    row = {"limit_cpus": 8, "used_cpus": 6, "limit_memory_mb": 10, "used_memory_mb": 0,
           "limit_disk_gb": 10, "used_disk_gb": 0}  # fmt: skip
    assert evaluate(CLAIM_GUARD, row, {**REQUEST, "memory_mb": 1, "disk_gb": 1}).failed == ("cpus",)


def test_null_propagates_as_in_sql() -> None:
    row = {"a": None, "b": 2}
    assert value_of(Coalesce(Column("a"), Const(5)), row, {}) == 5
    assert truth_of(AtMost(Column("a"), Const(1)), row, {}) is None
    assert truth_of(AnyOf((IsNull(Column("a")), AtMost(Column("a"), Const(0)))), row, {})
    assert truth_of(AnyOf((AtMost(Column("a"), Const(0)), AtMost(Column("b"), Const(1)))),
                    row, {}) is None  # fmt: skip
    assert truth_of(AnyOf((AtMost(Column("b"), Const(1)),)), row, {}) is False


def test_real_params_are_floats() -> None:
    assert value_of(Param("x", real=True), {}, {"x": 3}) == 3.0
    assert isinstance(value_of(Param("x", real=True), {}, {"x": 3}), float)


@given(node_guard_rows(), admit_params())
def test_the_verdict_is_the_conjunction_of_the_predicates(
    row: dict[str, object], params: dict[str, float | int]
) -> None:
    guard = node_guard(float(params["target_load"]))
    verdict = evaluate(guard, row, params)
    expected = [name for name, t in guard.tests() if truth_of(t, row, params) is not True]
    assert list(verdict.failed) == expected
    assert verdict.passed == (not expected)


def test_the_demand_clause_reports_its_parts() -> None:
    assert [name for name, _ in DEMAND_CLAUSE.parts] == ["cpu_load_1", "expected_demand"]
    assert not DEMAND_CLAUSE.charged
