"""What a read of a node presumes: a refusal on a real dimension or a cordon, never on demand."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given

from fleetgate.domain.capacity.denials import deny
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.guards import node_guard
from fleetgate.domain.capacity.model import NodeMetrics, NodeState
from fleetgate.domain.capacity.presumption import presumed_refusal
from tests.strategies import admit_params, node_guard_rows

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ONE = Resources(1, 100, 1)


def node(used_cpus: int = 0, load: float = 0.0, schedulable: bool = True) -> NodeState:
    return NodeState(
        name="a", pool="", labels={}, capacity=Capacity(8, 1000, 100),
        limits=Resources(24, 1000, 100), used=Resources(used_cpus, 0, 0), expected_demand=0.0,
        metrics=NodeMetrics(load, 8), schedulable=schedulable, updated_at=T0,
    )  # fmt: skip


def test_a_node_with_room_is_not_presumed_to_refuse() -> None:
    assert presumed_refusal(node(used_cpus=23), ONE, 0.6, 0.75) is None


def test_a_full_dimension_is_presumed_with_the_guards_own_details() -> None:
    denial = presumed_refusal(node(used_cpus=24), ONE, 0.6, 0.75)
    assert denial is not None and denial.exceeded == {"cpus"} and not denial.demand_only


def test_a_cordon_is_presumed() -> None:
    denial = presumed_refusal(node(schedulable=False), ONE, 0.6, 0.75)
    assert denial is not None and denial.cordoned


def test_demand_alone_is_never_presumed_the_waiver_may_still_admit() -> None:
    assert presumed_refusal(node(load=50.0), ONE, 0.6, 0.75) is None
    # Demand beside a full dimension: presumed, and the details still say so.
    both = presumed_refusal(node(used_cpus=24, load=50.0), ONE, 0.6, 0.75)
    assert both is not None and both.exceeded == {"cpus", "demand"}


@given(row=node_guard_rows(), params=admit_params())
def test_the_quick_answer_is_the_guards_own(
    row: dict[str, object], params: dict[str, float | int]
) -> None:
    # The room check without the evaluator must say exactly what the guard's denial says.
    def res(prefix: str) -> Resources:
        return Resources(*(int(row[f"{prefix}{d}"]) for d in ("cpus", "memory_mb", "disk_gb")))  # type: ignore[call-overload]

    load, schedulable = row["cpu_load_1"], row["cpu_schedulable"]
    state = NodeState(
        name="a", pool="", labels={}, capacity=Capacity(8, 1000, 100), limits=res("limit_"),
        used=res("used_"), expected_demand=float(row["expected_demand"]),  # type: ignore[arg-type]
        metrics=NodeMetrics(load, schedulable),  # type: ignore[arg-type]
        schedulable=bool(row["schedulable"]), updated_at=T0,
    )  # fmt: skip
    size = Resources(int(params["cpus"]), int(params["memory_mb"]), int(params["disk_gb"]))
    target_load = float(params["target_load"])
    full = deny(node_guard(target_load), state.guard_row(), {**params})
    expected = None if full is None or full.demand_only else full
    assert presumed_refusal(state, size, float(params["demand"]), target_load) == expected
