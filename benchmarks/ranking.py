"""Ranking: one placement decision over a large fleet, the domain's functions alone.

A decision is ``eligible`` (which nodes are candidates) then ``rank`` (load buckets and the
weighted shuffle) over every node, as ``PlacementService.place`` calls them. Nodes have varied
load and memory use so every bucket is populated.
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
from fleetgate.domain.capacity.ranking import eligible, rank

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

    def decide() -> None:
        rank(eligible(nodes, pool="bench"), 0.75, rng)

    decide()  # warm caches
    samples = timed(decide, sizes.ranking_decisions)
    t = Table(
        "Ranking: one decision (eligible + rank) over the whole fleet",
        ["nodes", "decisions", "mean ms", "p50 ms", "p99 ms"],
    )
    mean = sum(samples) / len(samples)
    p50, p99 = percentile(samples, 0.5), percentile(samples, 0.99)
    t.add(f"{len(nodes):,}", len(samples), ms(mean), ms(p50), ms(p99))
    verdict = Verdict(
        f"ranking < 5 ms at {sizes.ranking_nodes:,} nodes",
        f"p50 {ms(p50)} ms",
        p50 < TARGET_SECONDS,
    )
    return t, verdict
