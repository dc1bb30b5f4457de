"""Ranking: one placement decision over a large fleet, the domain's functions alone.

``PlacementService.place`` ranks a snapshot of the nodes: once per refresh (at most once per
``capacity.snapshot_seconds``) ``eligible`` picks the candidates and ``Candidates`` computes each
one's bucket and weight; per decision an order is drawn lazily and the walk takes its first
candidate. Both are timed, in their own columns: the decision is what every placement pays,
the build is what a refresh pays (once, for all the placements in that window). The old
per-decision cost, ``eligible`` + ``rank`` over every node, is timed alongside for comparison.
Nodes have varied load and memory use so every bucket is populated.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime

from benchmarks.report import Table, Verdict, ms
from benchmarks.seed import NODE_CAPACITY, node_names
from benchmarks.sizes import Sizes
from benchmarks.stats import percentile, timed
from fleetgate.domain.capacity.dimensions import Overcommit, Resources, node_limits
from fleetgate.domain.capacity.model import NodeMetrics, NodeState
from fleetgate.domain.capacity.ranking import Candidates, eligible, rank
from fleetgate.domain.capacity.walk import Walk

TARGET_SECONDS = 0.005


def fleet(count: int, seed: int = 3) -> list[NodeState]:
    """``count`` nodes with random load, memory use and demand; a few cordoned."""
    rng = random.Random(seed)
    limits = node_limits(NODE_CAPACITY, Overcommit())
    at = datetime(2026, 1, 1, tzinfo=UTC)
    out = []
    for name in node_names(count):
        used_memory = rng.randrange(limits.memory_mb)
        out.append(
            NodeState(
                name=name,
                pool="bench",
                labels={"zone": f"z{rng.randrange(3)}"},
                capacity=NODE_CAPACITY,
                limits=limits,
                used=Resources(rng.randrange(limits.cpus), used_memory, 0),
                expected_demand=rng.uniform(0, 20),
                metrics=NodeMetrics(cpu_load_1=rng.uniform(0, 64), cpu_schedulable=64),
                schedulable=rng.random() > 0.02,
                updated_at=at,
            )
        )
    return out


def run(sizes: Sizes) -> tuple[Table, Verdict]:
    """Time ``sizes.ranking_decisions`` decisions over ``sizes.ranking_nodes`` nodes."""
    nodes = fleet(sizes.ranking_nodes)
    rng = random.Random(11)

    def build() -> Candidates:
        return Candidates(eligible(nodes, pool="bench"), 0.75)

    candidates = build()

    def decide() -> None:
        # What a placement pays: draw an order and walk to its first candidate.
        walk = Walk(r.node.name for r in candidates.order(rng))
        walk.next_attempt()

    def rank_all() -> None:
        rank(eligible(nodes, pool="bench"), 0.75, rng)

    decide()  # warm caches
    samples = timed(decide, sizes.ranking_decisions)
    builds = timed(build, max(3, sizes.ranking_decisions // 10))
    full = timed(rank_all, max(3, sizes.ranking_decisions // 10))
    t = Table(
        "Ranking: one decision (draw the order, walk to the first candidate) over a snapshot",
        [
            "nodes",
            "decisions",
            "decision mean ms",
            "decision p50 ms",
            "decision p99 ms",
            "snapshot build p50 ms (once per refresh)",
            "full rank p50 ms (before: every decision)",
        ],
    )
    mean = sum(samples) / len(samples)
    p50, p99 = percentile(samples, 0.5), percentile(samples, 0.99)
    t.add(
        f"{len(nodes):,}",
        len(samples),
        ms(mean),
        ms(p50),
        ms(p99),
        ms(percentile(builds, 0.5)),
        ms(percentile(full, 0.5)),
    )
    verdict = Verdict(
        f"ranking < 5 ms at {sizes.ranking_nodes:,} nodes",
        f"p50 {ms(p50)} ms per decision (+ {ms(percentile(builds, 0.5))} ms per snapshot refresh)",
        p50 < TARGET_SECONDS,
    )
    return t, verdict
