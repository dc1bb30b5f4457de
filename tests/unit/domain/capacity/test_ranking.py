"""Candidate ranking: buckets, weights, the seeded weighted shuffle, eligibility."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from random import Random

from hypothesis import given
from hypothesis import strategies as st

from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.model import NodeMetrics, NodeState
from fleetgate.domain.capacity.ranking import (
    bucket,
    eligible,
    load_fraction,
    ram_fraction,
    rank,
    weight,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def node(
    name: str,
    load: float | None = 0.0,
    threads: int | None = 8,
    used_mb: int = 0,
    limit_mb: int = 1000,
    pool: str = "",
    schedulable: bool = True,
) -> NodeState:
    return NodeState(
        name=name, pool=pool, labels={}, capacity=Capacity(8, limit_mb, 100),
        limits=Resources(24, limit_mb, 100), used=Resources(0, used_mb, 0), expected_demand=0.0,
        metrics=NodeMetrics(load, threads), schedulable=schedulable, updated_at=T0,
    )  # fmt: skip


def test_bucket_is_the_worse_of_cpu_and_memory_in_quarters() -> None:
    assert bucket(node("a", load=0.0)) == 0
    assert bucket(node("a", load=2.0)) == 1  # 0.25 of 8 threads
    assert bucket(node("a", load=0.0, used_mb=760)) == 3
    assert bucket(node("a", load=9.0, used_mb=100)) == 4


def test_unknown_metrics_fall_back_sensibly() -> None:
    n = node("a", load=None, threads=None)
    assert load_fraction(n) == 0.0 and weight(n, 0.75) == 0.75 * 8
    assert ram_fraction(node("a", limit_mb=0)) == 0.0


def test_weight_is_headroom_times_free_memory_floored() -> None:
    assert weight(node("a", load=2.0, used_mb=500), 0.75) == (6 - 2) * 0.5
    assert weight(node("a", load=20.0, used_mb=1000), 0.75) == 0.1 * 0.1


def test_lower_buckets_always_come_first() -> None:
    nodes = [node("busy", load=7.0), node("mid", load=3.0), node("idle", load=0.0)]
    for seed in range(20):
        assert [r.node.name for r in rank(nodes, 0.75, Random(seed))] == ["idle", "mid", "busy"]


def test_the_shuffle_is_deterministic_for_a_seed_and_favours_weight() -> None:
    nodes = [node("light", load=0.0), node("heavy", load=1.9)]  # same bucket, weights 6 vs 4.1
    assert [r.node.name for r in rank(nodes, 0.75, Random(3))] == [
        r.node.name for r in rank(nodes, 0.75, Random(3))
    ]
    firsts = Counter(rank(nodes, 0.75, Random(seed))[0].node.name for seed in range(2000))
    share = firsts["light"] / 2000
    assert 0.55 < share < 0.65  # P(light first) = 6 / (6 + 4.1) ≈ 0.594


@given(st.lists(st.floats(0, 16), min_size=0, max_size=8), st.integers(0, 2**32))
def test_ranking_orders_never_drops(loads: list[float], seed: int) -> None:
    nodes = [node(f"n{i}", load=x) for i, x in enumerate(loads)]
    ranked = rank(nodes, 0.75, Random(seed))
    assert sorted(r.node.name for r in ranked) == sorted(n.name for n in nodes)
    assert [r.bucket for r in ranked] == sorted(r.bucket for r in ranked)


def test_eligible_keeps_schedulable_nodes_of_the_pool() -> None:
    nodes = [node("a", pool="gpu"), node("b", pool="cpu"), node("c", pool="gpu", schedulable=False)]
    assert [n.name for n in eligible(nodes)] == ["a", "b"]
    assert [n.name for n in eligible(nodes, pool="gpu")] == ["a"]
    assert [n.name for n in eligible(nodes, names=["b", "c"])] == ["b"]


@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.floats(0, 64)),
            st.one_of(st.none(), st.integers(0, 64)),
            st.integers(0, 1000),
            st.integers(0, 1000),
        ),
        max_size=12,
    ),
    st.floats(0, 2),
    st.integers(0, 2**32),
)
def test_rank_is_bucket_then_weighted_key_of_the_named_functions(
    specs: list[tuple[float | None, int | None, int, int]], target_load: float, seed: int
) -> None:
    # The ranking loop computes bucket() and weight() inline for speed; it must stay identical
    # to sorting by (bucket, -U ** (1 / weight), position) with one U drawn per node in order.
    nodes = [
        node(f"n{i}", load=load, threads=threads, used_mb=used, limit_mb=limit)
        for i, (load, threads, used, limit) in enumerate(specs)
    ]
    rng = Random(seed)
    expected = sorted(
        (bucket(n), -(rng.random() ** (1.0 / weight(n, target_load))), i)
        for i, n in enumerate(nodes)
    )
    ranked = rank(nodes, target_load, Random(seed))
    assert [r.node.name for r in ranked] == [nodes[i].name for _, _, i in expected]
    assert [(r.bucket, r.weight) for r in ranked] == [
        (bucket(nodes[i]), weight(nodes[i], target_load)) for _, _, i in expected
    ]
