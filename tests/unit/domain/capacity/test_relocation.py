"""The whole-node relocation judgement: the node sync's walk, replayed over a snapshot."""

from __future__ import annotations

from datetime import UTC, datetime
from random import Random

from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.model import ClusterState, NodeMetrics, NodeState, Placement
from fleetgate.domain.capacity.relocation import SURGE_SUFFIX, Snapshot, judge, surge_for

T0 = datetime(2026, 1, 1, tzinfo=UTC)
FOUR = Resources(4, 1024, 5)
POLICY = DemandPolicy()


def node(
    name: str,
    used: Resources = Resources(),
    limit_cpus: int = 12,
    *,
    pool: str = "p",
    load: float | None = None,
    schedulable: bool = True,
) -> NodeState:
    return NodeState(
        name=name, pool=pool, labels={}, capacity=Capacity(limit_cpus // 3, 16384, 100),
        limits=Resources(limit_cpus, 16384, 100), used=used, expected_demand=0.0,
        metrics=NodeMetrics(load, None if load is None else 4), schedulable=schedulable,
        updated_at=T0,
    )  # fmt: skip


def held(on: str, count: int, size: Resources = FOUR) -> tuple[Placement, ...]:
    return tuple(Placement(f"{on}-{i}", "team", on, size, 0.0, T0) for i in range(count))


def times(size: Resources, count: int) -> Resources:
    total = Resources()
    for _ in range(count):
        total = total.plus(size)
    return total


def snapshot(source: NodeState, others: list[NodeState], count: int) -> Snapshot:
    return Snapshot(source.name, (source, *others), None, held(source.name, count))


def test_placements_that_fit_the_surge_and_the_others_fit() -> None:
    source = node("a", times(FOUR, 5), 24)
    verdict = judge(snapshot(source, [node("b", times(FOUR, 1))], 5), POLICY, Random(1))
    assert verdict.fits and verdict.placements == 5 and not verdict.stranded
    assert verdict.shortfall() == Resources()
    # The surge is as small as the pool's smallest node: 3 on it, 1 on b, and one is charged
    # before the next walks (never two on the same room).
    landed = [target for _, target in verdict.targets]
    assert landed.count("a" + SURGE_SUFFIX) == 3 and landed.count("b") == 2


def test_what_no_node_takes_is_stranded_and_what_is_missing_is_counted() -> None:
    source = node("a", times(FOUR, 5), 24)
    full = node("b", times(FOUR, 3))
    verdict = judge(snapshot(source, [full], 5), POLICY, Random(1))
    assert not verdict.fits and len(verdict.stranded) == 2
    assert verdict.missing == Resources(8, 0, 0)
    assert verdict.as_dict()["missing"] == {"cpus": 8, "memory_mb": 0, "disk_gb": 0}


def test_room_split_across_nodes_strands_with_nothing_missing_in_total() -> None:
    # 2 vCPU free on each of b and c, and 2 left on the surge (as small as b and c) once it
    # takes two: 6 free in all, yet no node takes the third 4-vCPU placement.
    source = node("a", times(FOUR, 3), 16)
    others = [node("b", Resources(8, 0, 0), 10), node("c", Resources(8, 0, 0), 10)]
    verdict = judge(snapshot(source, others, 3), POLICY, Random(1))
    assert len(verdict.stranded) == 1 and verdict.missing == Resources()


def test_cordoned_nodes_and_other_pools_nodes_follow_the_relocations_candidates() -> None:
    source = node("a", times(FOUR, 5), 24)
    cordoned = node("b", schedulable=False)
    elsewhere = node("c", pool="q")  # the real relocation walks every pool's nodes too
    verdict = judge(snapshot(source, [cordoned, elsewhere], 5), POLICY, Random(1))
    assert verdict.fits
    assert {target for _, target in verdict.targets} == {"a" + SURGE_SUFFIX, "c"}


def test_a_node_refusing_on_demand_alone_is_waived_as_the_relocation_waives_it() -> None:
    source = node("a", times(FOUR, 2), 8)
    busy = node("b", load=50.0)  # far above the demand budget, with room
    verdict = judge(snapshot(source, [busy], 2), POLICY, Random(1), surge=False)
    assert verdict.fits and {t for _, t in verdict.targets} == {"b"}


def test_without_a_surge_only_the_others_count() -> None:
    source = node("a", times(FOUR, 2))
    verdict = judge(
        snapshot(source, [node("b", times(FOUR, 2))], 2), POLICY, Random(1), surge=False
    )
    assert len(verdict.stranded) == 1 and verdict.missing == Resources(4, 1024, 5).minus_floored(
        Resources(0, 16384 - 2048, 90)
    )


def test_claims_must_still_fit_the_total_a_smaller_surge_leaves() -> None:
    source = node("a", Resources(), 24)
    others = [node("b")]
    claimed = ClusterState(Resources(36, 32768, 200), Resources(30, 0, 0), Resources(), T0)
    snap = Snapshot("a", (source, *others), claimed, held("a", 1, Resources(0, 0, 0)))
    verdict = judge(snap, POLICY, Random(1))
    # The total drops from 36 to 36 - 24 + 12 = 24 vCPU, below the 30 claimed.
    assert verdict.cluster_missing == Resources(6, 0, 0) and not verdict.fits


def test_a_dimension_the_rotation_does_not_lower_is_never_refused() -> None:
    source = node("a", Resources(), 12)
    over = ClusterState(Resources(24, 32768, 200), Resources(99, 0, 0), Resources(), T0)
    snap = Snapshot("a", (source, node("b")), over, held("a", 1, Resources(0, 0, 0)))
    assert judge(snap, POLICY, Random(1)).fits  # already over, but not by this rotation


def test_a_node_the_ledger_does_not_hold_or_that_holds_nothing_fits() -> None:
    assert judge(Snapshot("gone", (node("b"),), None, ()), POLICY, Random(1)).fits
    assert judge(Snapshot("b", (node("b"),), None, ()), POLICY, Random(1)).fits


def test_the_surge_offers_the_least_the_pool_shows_and_carries_nothing() -> None:
    source = node("a", times(FOUR, 5), 24, load=3.0)
    surge = surge_for(source, [node("b", limit_cpus=12), node("c", limit_cpus=6, pool="q")])
    assert surge.limits == Resources(12, 16384, 100)  # the other pool's smaller node ignored
    assert surge.used == Resources() and surge.metrics == NodeMetrics() and surge.schedulable


def test_the_same_snapshot_and_seed_give_the_same_verdict() -> None:
    source = node("a", times(FOUR, 5), 24)
    snap = snapshot(source, [node("b", Resources(4, 0, 0)), node("c")], 5)
    assert judge(snap, POLICY, Random(7)) == judge(snap, POLICY, Random(7))
