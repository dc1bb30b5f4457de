"""What a read of a node presumes: a refusal on a real dimension or a cordon, never on demand."""

from __future__ import annotations

from datetime import UTC, datetime

from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.model import NodeMetrics, NodeState
from fleetgate.domain.capacity.presumption import presumed_refusal

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
