"""Candidate ranking: buckets, weights, the weighted shuffle, the lazy order, eligibility."""

from __future__ import annotations

import math
from collections import Counter
from datetime import UTC, datetime
from itertools import permutations
from random import Random

from hypothesis import given
from hypothesis import strategies as st

from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.model import NodeMetrics, NodeState
from fleetgate.domain.capacity.ranking import (
    Candidates,
    bucket,
    eligible,
    load_fraction,
    order_key,
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


def test_the_order_without_the_shuffle_is_bucket_then_weight_then_name() -> None:
    nodes = [node("b", load=1.0), node("busy", load=7.0), node("a", load=1.0), node("c")]
    ordered = sorted(nodes, key=lambda n: order_key(n, 0.75))
    assert [n.name for n in ordered] == ["c", "a", "b", "busy"]  # c: more headroom than a, b
    n = nodes[0]
    assert order_key(n, 0.75) == (bucket(n), -weight(n, 0.75), "b")


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


def successive(weights: dict[str, float], order: tuple[str, ...]) -> float:
    """P(order) under successive sampling: each next one in proportion to the weight left."""
    left, p = sum(weights.values()), 1.0
    for name in order:
        p *= weights[name] / left
        left -= weights[name]
    return p


def within(observed: int, p: float, draws: int) -> bool:
    # Five standard deviations: the seeds are fixed, so this cannot flake, and a wrong
    # distribution (e.g. uniform, or weights squared) is tens of deviations away at these sizes.
    return abs(observed - p * draws) <= 5 * math.sqrt(draws * p * (1 - p)) + 1


@given(
    st.lists(st.tuples(st.floats(0, 16), st.integers(0, 1000)), max_size=40),
    st.integers(0, 2**32),
)
def test_a_fully_drawn_order_has_every_candidate_once_buckets_ascending(
    specs: list[tuple[float, int]], seed: int
) -> None:
    nodes = [node(f"n{i}", load=load, used_mb=used) for i, (load, used) in enumerate(specs)]
    drawn = list(Candidates(nodes, 0.75).order(Random(seed)))
    assert sorted(r.node.name for r in drawn) == sorted(n.name for n in nodes)
    assert [r.bucket for r in drawn] == sorted(r.bucket for r in drawn)
    assert all(r.bucket == bucket(r.node) and r.weight == weight(r.node, 0.75) for r in drawn)


@given(st.lists(st.floats(0, 16), max_size=30), st.integers(0, 2**32))
def test_the_order_is_deterministic_for_a_seed_and_drawn_lazily(
    loads: list[float], seed: int
) -> None:
    candidates = Candidates([node(f"n{i}", load=x) for i, x in enumerate(loads)], 0.75)
    first, second = candidates.order(Random(seed)), candidates.order(Random(seed))
    head = next(first, None)
    assert len(first.drawn) == (0 if head is None else 1)  # nothing beyond what was asked
    rest = list(first)
    assert ([] if head is None else [head, *rest]) == list(second) == first.drawn


def test_concurrent_orders_share_nothing() -> None:
    # Two decisions interleaving their draws over one snapshot get what each gets alone.
    candidates = Candidates([node(f"n{i}", load=i % 5, threads=8) for i in range(50)], 0.75)
    alone = [list(candidates.order(Random(seed))) for seed in (1, 2)]
    a, b = candidates.order(Random(1)), candidates.order(Random(2))
    together: tuple[list[object], list[object]] = ([], [])
    for _ in range(50):
        together[0].append(next(a))
        together[1].append(next(b))
    assert together == (alone[0], alone[1])


def test_first_draws_follow_the_weights() -> None:
    # One bucket (no load), weights 0.75 x threads: 0.75, 1.5, 3, 6, 12.
    nodes = [node(f"t{t}", threads=t) for t in (1, 2, 4, 8, 16)]
    candidates = Candidates(nodes, 0.75)
    assert len(candidates.bands) == 1
    draws = 20_000
    firsts = Counter(next(candidates.order(Random(seed))).node.name for seed in range(draws))
    total = 0.75 * (1 + 2 + 4 + 8 + 16)
    for t in (1, 2, 4, 8, 16):
        assert within(firsts[f"t{t}"], 0.75 * t / total, draws), (t, firsts)


def test_whole_orders_follow_successive_sampling_as_ranking_does() -> None:
    # Every permutation of three, so draws by rejection, the sorted remainder, and the switch
    # between them are all covered; ``rank`` (the Efraimidis-Spirakis sort) is held to the same.
    nodes = [node(f"t{t}", threads=t) for t in (1, 3, 12)]
    weights = {n.name: weight(n, 0.75) for n in nodes}
    candidates = Candidates(nodes, 0.75)
    draws = 30_000
    lazy = Counter(
        tuple(r.node.name for r in candidates.order(Random(seed))) for seed in range(draws)
    )
    full = Counter(
        tuple(r.node.name for r in rank(nodes, 0.75, Random(seed))) for seed in range(draws)
    )
    for order in permutations(weights):
        p = successive(weights, order)
        assert within(lazy[order], p, draws), (order, lazy)
        assert within(full[order], p, draws), (order, full)


def test_a_band_mostly_drawn_still_draws_by_weight() -> None:
    # A heavy node drawn first leaves a band whose remaining weight is under half: the second
    # draw comes from the sorted remainder and must still follow the weights.
    nodes = [node("heavy", threads=64), node("t1", threads=1), node("t4", threads=4)]
    candidates = Candidates(nodes, 0.75)
    seconds: Counter[str] = Counter()
    for seed in range(40_000):
        order = candidates.order(Random(seed))
        if next(order).node.name == "heavy":
            seconds[next(order).node.name] += 1
    n = sum(seconds.values())
    assert n > 30_000 and within(seconds["t4"], 4 / 5, n)


def test_an_empty_snapshot_draws_nothing() -> None:
    candidates = Candidates([], 0.75)
    assert len(candidates) == 0 and list(candidates.order(Random(1))) == []
