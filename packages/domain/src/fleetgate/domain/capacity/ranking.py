"""Candidate ordering (capacity spec 5.1): load buckets, then a weighted shuffle inside each.

Ranking orders, it never drops: a node that looks busy is tried later, not skipped, so a stale
metric can never cause a refusal on its own. The shuffle spreads concurrent requests that see the
same snapshot; its random source is injected so tests are deterministic.

``rank`` orders a whole list at once (the distribution the lazy order is held to); ``order_key``
is the order without the shuffle, for a relocation plan that must be the same every time (spreading
concurrent requests is not its concern: one plan is made per drain). A placement instead builds
``Candidates`` once per node snapshot and draws a ``CandidateOrder`` per decision: the same
distribution, but the cost of a decision is the candidates it actually tries, not the fleet.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterable, Iterator, Sequence
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


def scored(nodes: Iterable[NodeState], target_load: float) -> Iterator[Ranked]:
    """Each node with its ``bucket`` and ``weight``, computed exactly as those functions do.

    Inline in one generator rather than two calls per node: ranking scores every node of the
    fleet (each snapshot, or each ``rank``), so per-node function calls were most of its cost at
    10,000 nodes. A property test holds this to ``bucket`` and ``weight``.
    """
    floor = math.floor
    for node in nodes:
        metrics = node.metrics
        cs = metrics.cpu_schedulable
        threads = node.capacity.threads if cs is None else cs
        load = metrics.cpu_load_1 or 0.0
        limit = node.limits.memory_mb
        ram = node.used.memory_mb / limit if limit > 0 else 0.0
        cpu = load / threads if threads > 0 else 0.0
        b = max(floor(cpu / BUCKET_WIDTH), floor(ram / BUCKET_WIDTH))
        w = max(MIN_FACTOR, target_load * threads - load) * max(MIN_FACTOR, 1.0 - ram)
        yield Ranked(node, b, w)


def rank(nodes: Sequence[NodeState], target_load: float, rng: Random) -> list[Ranked]:
    """Order candidates: ascending bucket; inside a bucket a weighted shuffle without replacement.

    The shuffle sorts by ``U ** (1 / weight)`` descending (Efraimidis-Spirakis), which draws each
    next candidate with probability proportional to its weight. One ``U`` is drawn per node, in
    input order.
    """
    draw = rng.random
    keyed = [
        (r.bucket, -(draw() ** (1.0 / r.weight)), position, r)
        for position, r in enumerate(scored(nodes, target_load))
    ]
    keyed.sort()
    return [r for _, _, _, r in keyed]


def order_key(node: NodeState, target_load: float) -> tuple[int, float, str]:
    """The node's place in the ranking without its shuffle: its bucket, then the larger weight
    first, then its name. A relocation plan (``relocation.plan``) orders by it: the same ledger
    must always get the same plan, which a draw cannot give."""
    return bucket(node), -weight(node, target_load), node.name


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


class Band(NamedTuple):
    """The candidates of one bucket with their running weight sums (drawn from by bisection)."""

    bucket: int
    members: tuple[Ranked, ...]
    cumulative: tuple[float, ...]
    total: float


class Candidates:
    """A snapshot's candidates, each ranked once: bands of equal bucket, lowest bucket first.

    Built once per snapshot (O(n)) and never changed afterwards, so any number of concurrent
    decisions may draw from it: each ``order`` keeps its own state.
    """

    __slots__ = ("bands", "size")

    def __init__(self, nodes: Sequence[NodeState], target_load: float) -> None:
        by_bucket: dict[int, list[Ranked]] = {}
        for r in scored(nodes, target_load):
            by_bucket.setdefault(r.bucket, []).append(r)
        bands = []
        for b in sorted(by_bucket):
            members = tuple(by_bucket[b])
            cumulative = tuple(itertools.accumulate(r.weight for r in members))
            bands.append(Band(b, members, cumulative, cumulative[-1]))
        self.bands: tuple[Band, ...] = tuple(bands)
        self.size = len(nodes)

    def __len__(self) -> int:
        return self.size

    def order(self, rng: Random) -> CandidateOrder:
        """A fresh lazily drawn order over these candidates, for one decision."""
        return CandidateOrder(self, rng)


#: Rejected draws in a row after which a band's remainder is sorted instead (see ``_draw``).
MAX_REJECTIONS = 16


class CandidateOrder:
    """One decision's candidate order, drawn one candidate at a time (an iterator of Ranked).

    The distribution is the one ``rank`` gives (successive sampling: each next candidate of a
    band drawn with probability proportional to its weight among those not yet drawn), but a
    walk that admits on its first try pays for one draw, not for ordering the whole fleet.
    Inside a band a draw picks by bisection over the running weight sums and redraws if it hit
    a node already drawn; that is exact, since a redraw conditions on "not yet drawn". Once half
    of the band's weight is drawn (or a draw keeps hitting drawn nodes) the rest of the band is
    ordered at once with ``rank``'s ``U ** (1 / weight)`` keys, which is the same distribution
    for what remains. ``drawn`` lists the candidates handed out so far, in order.
    """

    __slots__ = ("_band", "_candidates", "_mass", "_random", "_rest", "_taken", "drawn")

    def __init__(self, candidates: Candidates, rng: Random) -> None:
        self._candidates = candidates
        self._random = rng.random
        self._band = 0
        self._taken: set[int] = set()
        self._mass = 0.0
        self._rest: list[Ranked] | None = None
        self.drawn: list[Ranked] = []

    def __iter__(self) -> CandidateOrder:
        return self

    def __next__(self) -> Ranked:
        bands = self._candidates.bands
        while self._band < len(bands):
            picked = self._draw(bands[self._band])
            if picked is not None:
                self.drawn.append(picked)
                return picked
            self._band += 1
            self._taken = set()
            self._mass = 0.0
            self._rest = None
        raise StopIteration

    def _draw(self, band: Band) -> Ranked | None:
        members, taken = band.members, self._taken
        if self._rest is None:
            if self._mass * 2.0 < band.total:
                draw, cumulative, total = self._random, band.cumulative, band.total
                last = len(members) - 1
                for _ in range(MAX_REJECTIONS):
                    i = min(bisect.bisect_right(cumulative, draw() * total), last)
                    if i not in taken:
                        taken.add(i)
                        self._mass += members[i].weight
                        return members[i]
            draw = self._random
            keyed = sorted(
                (-(draw() ** (1.0 / r.weight)), i) for i, r in enumerate(members) if i not in taken
            )
            # Reversed, so each next candidate is a cheap pop from the end.
            self._rest = [members[i] for _, i in reversed(keyed)]
        return self._rest.pop() if self._rest else None
