"""Timing helpers: percentiles, and a closed-loop load generator with N concurrent workers."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field


def percentile(samples: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``samples`` by the nearest-rank method (0.0 if empty)."""
    if not samples:
        return 0.0
    ordered = sorted(samples)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


@dataclass
class Load:
    """What one closed-loop run measured: per-operation latencies, the wall time, the outcomes."""

    latencies: list[float] = field(default_factory=list)
    elapsed: float = 0.0
    #: CPU seconds this process spent (all threads): the client side's own cost.
    cpu: float = 0.0
    outcomes: dict[str, int] = field(default_factory=dict)

    @property
    def ops(self) -> int:
        """Operations completed."""
        return len(self.latencies)

    @property
    def throughput(self) -> float:
        """Operations per second of wall time."""
        return self.ops / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def cpu_ms_per_op(self) -> float:
        """Client CPU milliseconds per operation (robust to other load on the machine)."""
        return self.cpu * 1000.0 / self.ops if self.ops else 0.0

    def p(self, q: float) -> float:
        """Latency quantile in milliseconds."""
        return percentile(self.latencies, q) * 1000.0

    def count(self, outcome: str) -> int:
        """How many operations ended with ``outcome``."""
        return self.outcomes.get(outcome, 0)


Operation = Callable[[int, int], Awaitable[str]]


async def closed_loop(
    workers: int, ops: int, operation: Operation, max_seconds: float | None = None
) -> Load:
    """Run ``ops`` operations on ``workers`` concurrent workers, each starting its next at once.

    ``operation(worker, i)`` performs operation number ``i`` and returns its outcome's name
    ("admitted", "refused", ...). Every worker draws the next number from one shared counter,
    so the total is exact whatever the speed of each worker. With ``max_seconds`` no operation
    starts after that much wall time (a slow configuration ends with fewer operations, bounded).
    """
    load = Load()
    counter = iter(range(ops))
    deadline = None if max_seconds is None else time.perf_counter() + max_seconds

    async def worker(w: int) -> None:
        for i in counter:
            if deadline is not None and time.perf_counter() > deadline:
                return
            start = time.perf_counter()
            outcome = await operation(w, i)
            load.latencies.append(time.perf_counter() - start)
            load.outcomes[outcome] = load.outcomes.get(outcome, 0) + 1

    began, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker(w) for w in range(workers)))
    load.elapsed = time.perf_counter() - began
    load.cpu = time.process_time() - cpu
    return load


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    """Seconds each of ``repeat`` calls of ``fn`` took."""
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out
