"""Candidate ordering (capacity spec 5.1): load buckets, then a weighted shuffle inside each.

Ranking orders, it never drops: a node that looks busy is tried later, not skipped, so a stale
metric can never cause a refusal on its own. The shuffle spreads concurrent requests that see the
same snapshot; its random source is injected so tests are deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from random import Random

from fleetgate.domain.capacity.model import NodeState

BUCKET_WIDTH = 0.25
MIN_FACTOR = 0.1


@dataclass(frozen=True)
class Ranked:
    """A candidate with the figures it was ranked by (reported in the walk's events)."""

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
    next candidate with probability proportional to its weight.
    """
    keyed = []
    for position, node in enumerate(nodes):
        w = weight(node, target_load)
        b = bucket(node)
        u = rng.random()
        keyed.append((b, -(u ** (1.0 / w)), position, Ranked(node, b, w)))
    keyed.sort(key=lambda k: (k[0], k[1], k[2]))
    return [k[3] for k in keyed]


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
