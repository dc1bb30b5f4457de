"""The dry run's trial: the admission's guards and walk, in Python, over rows it only reads."""

from __future__ import annotations

from datetime import UTC, datetime

from fleetgate.domain.capacity.claims import Claim, ClaimState
from fleetgate.domain.capacity.denials import Stage
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.model import ClusterState, NodeMetrics, NodeState
from fleetgate.domain.capacity.trial import claim_row, trial

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ROOMY = ClusterState(Resources(1000, 10**6, 10**4), Resources(), Resources(), T0)
ONE = Resources(1, 100, 1)


def node(name: str, used_cpus: int = 0, load: float = 0.0, schedulable: bool = True) -> NodeState:
    return NodeState(
        name=name, pool="", labels={}, capacity=Capacity(8, 1000, 100),
        limits=Resources(24, 1000, 100), used=Resources(used_cpus, 0, 0), expected_demand=0.0,
        metrics=NodeMetrics(load, 8), schedulable=schedulable, updated_at=T0,
    )  # fmt: skip


def claim(limit: Resources, used: Resources) -> Claim:
    return Claim("c1", "ns", limit, used, ClaimState.ACTIVE, T0, T0, T0)


def test_the_first_node_with_room_is_chosen_and_the_full_ones_named() -> None:
    nodes = {"a": node("a", used_cpus=24), "b": node("b", schedulable=False), "c": node("c")}
    found = trial(ONE, 0.6, 0.75, ["a", "b", "c"], nodes, ROOMY)
    assert found.node == "c" and not found.waived
    assert found.denials["a"].exceeded == {"cpus"} and found.denials["b"].cordoned


def test_a_demand_only_refusal_is_waived_as_the_real_walk_waives_it() -> None:
    found = trial(ONE, 0.6, 0.75, ["a"], {"a": node("a", load=50.0)}, ROOMY)
    assert (found.node, found.waived) == ("a", True)


def test_a_node_gone_from_the_ledger_is_skipped() -> None:
    found = trial(ONE, 0.6, 0.75, ["gone", "a"], {"a": node("a")}, ROOMY)
    assert found.node == "a" and "gone" not in found.denials


def test_the_namespace_side_refuses_every_candidate_alike() -> None:
    full = ClusterState(Resources(10, 1000, 10), Resources(), Resources(10, 0, 0), T0)
    found = trial(ONE, 0.6, 0.75, ["a", "b"], {"a": node("a"), "b": node("b")}, full)
    assert found.node is None
    assert {d.stage for d in found.denials.values()} == {Stage.CLUSTER}


def test_a_hard_claim_refuses_and_an_advisory_one_reports_the_overage() -> None:
    small = claim(Resources(1, 100, 1), Resources(1, 0, 0))
    nodes = {"a": node("a")}
    hard = trial(ONE, 0.6, 0.75, ["a"], nodes, ROOMY, small, hard=True)
    assert hard.node is None and hard.denials["a"].stage is Stage.CLAIM
    advisory = trial(ONE, 0.6, 0.75, ["a"], nodes, ROOMY, small)
    assert advisory.node == "a" and [d.dimension for d in advisory.claim_over_limit] == ["cpus"]
    # The overage goes to the cluster's unclaimed sums: a full cluster refuses it there.
    full = ClusterState(Resources(10, 1000, 10), Resources(1, 100, 1), Resources(9, 0, 0), T0)
    refused = trial(ONE, 0.6, 0.75, ["a"], nodes, full, small)
    assert refused.node is None and refused.denials["a"].stage is Stage.CLUSTER


def test_claim_row_names_the_columns_the_claim_guard_reads() -> None:
    row = claim_row(claim(Resources(4, 400, 40), Resources(1, 100, 10)))
    assert row == {"limit_cpus": 4, "limit_memory_mb": 400, "limit_disk_gb": 40,
                   "used_cpus": 1, "used_memory_mb": 100, "used_disk_gb": 10}  # fmt: skip
