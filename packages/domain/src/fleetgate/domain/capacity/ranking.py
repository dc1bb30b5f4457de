"""Candidate ordering (capacity spec 5.1): load buckets, then a weighted shuffle inside each.

Ranking orders, it never drops: a node that looks busy is tried later, not skipped, so a stale
metric can never cause a refusal on its own. The shuffle spreads concurrent requests that see the
same snapshot; its random source is injected so tests are deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from random import Random
from typing import NamedTuple

from fleetgate.domain.capacity.model import NodeState

BUCKET_WIDTH = 0.25
MIN_FACTOR = 0.1


class Ranked(NamedTuple):
    """A candidate with the figures it was ranked by (reported in the walk's events).

    A named tuple, not a dataclass: every placement makes one per node of the fleet, and a tuple
    is several times cheaper to build than a frozen dataclass.
    """

    node: NodeState
    bucket: int
    weight: float


def _threads(node: NodeState) -> int:
    # Until a node publishes cpu_schedulable, its hardware threads are the best estimate.
    cs = node.metrics.cpu_schedulable
    return node.capacity.threads if cs is None else cs


def ram_fraction(node: NodeState) -> float:
    """Share of the node's memory limit already allocated (0 for a node with no memory limit)."""
    limit = node.limits.memory_mb
    return node.used.memory_mb / limit if limit > 0 else 0.0


def load_fraction(node: NodeState) -> float:
    """1-minute load per schedulable thread (0 when either is unknown)."""
    threads = _threads(node)
    load = node.metrics.cpu_load_1 or 0.0
    return load / threads if threads > 0 else 0.0


def bucket(node: NodeState) -> int:
    """The node's load band: the worse of its cpu and memory fractions, in quarters."""
    return max(
        math.floor(load_fraction(node) / BUCKET_WIDTH),
        math.floor(ram_fraction(node) / BUCKET_WIDTH),
    )


def weight(node: NodeState, target_load: float) -> float:
    """Headroom below target load times free memory share, each floored at 0.1."""
    load = node.metrics.cpu_load_1 or 0.0
    cpu_room = max(MIN_FACTOR, target_load * _threads(node) - load)
    return cpu_room * max(MIN_FACTOR, 1.0 - ram_fraction(node))


def rank(nodes: Sequence[NodeState], target_load: float, rng: Random) -> list[Ranked]:
    """Order candidates: ascending bucket; inside a bucket a weighted shuffle without replacement.

    The shuffle sorts by ``U ** (1 / weight)`` descending (Efraimidis-Spirakis), which draws each
    next candidate with probability proportional to its weight. One ``U`` is drawn per node, in
    input order. The loop computes exactly ``bucket`` and ``weight`` inline: a placement ranks
    every node of the fleet, so per-node function calls are most of its cost at 10,000 nodes.
    """
    draw = rng.random
    floor = math.floor
    keyed = []
    for position, node in enumerate(nodes):
        metrics = node.metrics
        cs = metrics.cpu_schedulable
        threads = node.capacity.threads if cs is None else cs
        load = metrics.cpu_load_1 or 0.0
        limit = node.limits.memory_mb
        ram = node.used.memory_mb / limit if limit > 0 else 0.0
        cpu = load / threads if threads > 0 else 0.0
        b = max(floor(cpu / BUCKET_WIDTH), floor(ram / BUCKET_WIDTH))
        w = max(MIN_FACTOR, target_load * threads - load) * max(MIN_FACTOR, 1.0 - ram)
        keyed.append((b, -(draw() ** (1.0 / w)), position, w))
    keyed.sort()
    return [Ranked(nodes[p], b, w) for b, _, p, w in keyed]


def eligible(
    nodes: Sequence[NodeState], pool: str | None = None, names: Sequence[str] | None = None
) -> list[NodeState]:
    """The candidates for a request: schedulable nodes, in ``pool`` and among ``names`` if given.

    A cordoned node would only refuse, so it is not a candidate; every other node is, however busy.
    """
    wanted = None if names is None else set(names)
    return [
        n
        for n in nodes
        if n.schedulable
        and (pool is None or n.pool == pool)
        and (wanted is None or n.name in wanted)
    ]
