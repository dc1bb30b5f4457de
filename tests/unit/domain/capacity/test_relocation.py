"""The relocation plan: the node sync's walk, decided once and deterministically over a snapshot."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from random import Random

from hypothesis import given, settings
from hypothesis import strategies as st

from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.model import ClusterState, NodeMetrics, NodeState, Placement
from fleetgate.domain.capacity.relocation import Move, Snapshot, largest_first, plan

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


def test_placements_that_fit_the_other_nodes_fit_and_each_move_is_charged() -> None:
    source = node("a", times(FOUR, 4), 24)
    verdict = plan(snapshot(source, [node("b", times(FOUR, 1)), node("c")], 4), POLICY)
    assert verdict.fits and verdict.placements == 4 and not verdict.stranded
    assert verdict.shortfall() == Resources()
    # Never two on the same room: c (empty) takes two, then b and c alternate by load.
    landed = [m.target for m in verdict.moves]
    assert sorted(landed) == ["b", "b", "c", "c"] and not any(m.waived for m in verdict.moves)


def test_what_no_node_takes_is_stranded_and_what_is_missing_is_counted() -> None:
    source = node("a", times(FOUR, 5), 24)
    verdict = plan(snapshot(source, [node("b", times(FOUR, 1))], 5), POLICY)
    assert not verdict.fits and len(verdict.stranded) == 3
    assert verdict.missing == Resources(12, 0, 0)
    assert verdict.as_dict()["missing"] == {"cpus": 12, "memory_mb": 0, "disk_gb": 0}
    # A stranded placement keeps its simulated walk, for the audit trail.
    walk = verdict.walks[verdict.stranded[0]]
    assert walk.candidates == ["b"] and set(walk.denials) == {"b"}


def test_no_surge_is_counted_before_it_is_in_the_ledger() -> None:
    """Issue 41 item 2: nothing stands in for the rotation's replacement. A plan counts the
    nodes of the ledger only; a replacement counts once it has joined, as the node it is."""
    source = node("a", times(FOUR, 3), 12)
    alone = plan(snapshot(source, [], 3), POLICY)
    assert len(alone.stranded) == 3 and alone.missing == Resources(12, 3072, 15)
    joined = plan(snapshot(source, [node("surge", limit_cpus=6)], 3), POLICY)
    assert [m.target for m in joined.moves] == ["surge"] and len(joined.stranded) == 2


def test_largest_placements_go_first_so_fragmented_room_is_used_well() -> None:
    """Issue 41 item 3: two nodes with 6 vCPU free each; the node holds 6, 3 and 3. Smallest
    first could put a 3 on each node and strand the 6; largest first fits all three."""
    source = node("a", Resources(12, 0, 0), 12)
    parts = (
        Placement("small-1", "team", "a", Resources(3, 0, 0), 0.0, T0),
        Placement("small-2", "team", "a", Resources(3, 0, 0), 0.0, T0 + timedelta(1)),
        Placement("big", "team", "a", Resources(6, 0, 0), 0.0, T0 + timedelta(2)),
    )
    others = (source, node("b", Resources(6, 0, 0)), node("c", Resources(6, 0, 0)))
    verdict = plan(Snapshot("a", others, None, parts), POLICY)
    assert verdict.fits and verdict.moves[0].placement == "big"
    assert [p.id for p in largest_first(parts)] == ["big", "small-1", "small-2"]


def test_room_split_across_nodes_strands_with_nothing_missing_in_total() -> None:
    # 2 vCPU free on each of b and c: 4 free in all, yet no node takes a 4-vCPU placement.
    source = node("a", times(FOUR, 1), 16)
    others = [node("b", Resources(8, 0, 0), 10), node("c", Resources(8, 0, 0), 10)]
    verdict = plan(snapshot(source, others, 1), POLICY)
    assert len(verdict.stranded) == 1 and verdict.missing == Resources(0, 0, 0)


def test_cordoned_nodes_and_other_pools_nodes_follow_the_relocations_candidates() -> None:
    source = node("a", times(FOUR, 2), 24)
    cordoned = node("b", schedulable=False)
    elsewhere = node("c", pool="q")  # the real relocation walks every pool's nodes too
    verdict = plan(snapshot(source, [cordoned, elsewhere], 2), POLICY)
    assert verdict.fits and {m.target for m in verdict.moves} == {"c"}


def test_a_node_refusing_on_demand_alone_is_waived_and_the_move_says_so() -> None:
    source = node("a", times(FOUR, 2), 8)
    busy = node("b", load=50.0)  # far above the demand budget, with room
    verdict = plan(snapshot(source, [busy], 2), POLICY)
    assert verdict.fits and verdict.moves == (Move("a-0", "b", True), Move("a-1", "b", True))


def test_placements_leaving_other_nodes_are_planned_first_and_take_their_room() -> None:
    """Issue 41 item 4: what is stranded on a leaving node, or belongs to a rotation in
    progress elsewhere, counts against the room the plan may use."""
    source = node("a", times(FOUR, 2), 24)
    spare = node("spare", limit_cpus=12)
    leaving = node("gone", times(FOUR, 2), 12, schedulable=False, pool="q")
    alone = Snapshot("a", (source, spare, leaving), None, held("a", 2))
    assert plan(alone, POLICY).fits
    behind = Snapshot("a", (source, spare, leaving), None, held("a", 2), held("gone", 2))
    verdict = plan(behind, POLICY)
    # spare keeps 8 vCPU for what leaves gone: only 4 are left, for one of the two
    assert len(verdict.stranded) == 1 and verdict.missing == Resources(4, 0, 0)


def test_claims_must_still_fit_the_total_the_drain_leaves() -> None:
    source = node("a", Resources(), 24)
    others = [node("b")]
    claimed = ClusterState(Resources(36, 32768, 200), Resources(30, 0, 0), Resources(), T0)
    snap = Snapshot("a", (source, *others), claimed, held("a", 1, Resources(0, 0, 0)))
    verdict = plan(snap, POLICY)
    # The total drops from 36 to 12 vCPU, below the 30 claimed.
    assert verdict.cluster_missing == Resources(18, 0, 0) and not verdict.fits


def test_a_dimension_already_short_before_the_drain_is_not_its_doing() -> None:
    source = node("a", Resources(), 12)
    over = ClusterState(Resources(24, 32768, 200), Resources(99, 0, 0), Resources(), T0)
    snap = Snapshot("a", (source, node("b")), over, held("a", 1, Resources(0, 0, 0)))
    assert plan(snap, POLICY).fits  # already over, but not by this drain


def test_a_node_the_ledger_does_not_hold_or_that_holds_nothing_fits() -> None:
    assert plan(Snapshot("gone", (node("b"),), None, ()), POLICY).fits
    assert plan(Snapshot("b", (node("b"),), None, ()), POLICY).fits


sizes = st.builds(
    Resources, st.integers(0, 6), st.integers(0, 4096), st.integers(0, 20)
)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(
    st.lists(sizes, min_size=1, max_size=8),
    st.lists(st.tuples(st.integers(4, 24), sizes), min_size=0, max_size=5),
    st.integers(0, 2**32),
)
def test_the_same_ledger_gets_the_same_plan_whatever_the_order_it_is_read_in(
    parts: list[Resources], others: list[tuple[int, Resources]], seed: int
) -> None:
    """Issue 41 item 3: no draw decides anything, so the gate's verdict and the sync's plan,
    made from the same ledger, agree placement by placement."""
    source = node("a", times(Resources(0, 0, 0), 1), 64)
    nodes = [node(f"n{i}", used.minus_floored(Resources(cpus, 0, 0)), cpus)
             for i, (cpus, used) in enumerate(others)]  # fmt: skip
    placements = [Placement(f"p{i}", "team", "a", r, 0.0, T0) for i, r in enumerate(parts)]
    first = plan(Snapshot("a", (source, *nodes), None, tuple(placements)), POLICY)
    shuffled_nodes, shuffled = list(nodes), list(placements)
    Random(seed).shuffle(shuffled_nodes)
    Random(seed + 1).shuffle(shuffled)
    again = plan(Snapshot("a", (*shuffled_nodes, source), None, tuple(shuffled)), POLICY)
    assert first == again and first.moves == again.moves
    # Every planned move was charged: no node is planned past its limits.
    planned = {n.name: n.used for n in nodes}
    for move in first.moves:
        size = next(p.resources for p in placements if p.id == move.placement)
        planned[move.target] = planned[move.target].plus(size)
    for n in nodes:
        assert planned[n.name].cpus <= n.limits.cpus
