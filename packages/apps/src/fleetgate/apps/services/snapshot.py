"""The placement service's view of the fleet: the ledger's nodes, ranked once per refresh.

Capacity spec 5.1 ranks on a snapshot that may be up to 60 s stale, and ranking only orders:
the guarded admission is what refuses a node without room, so a stale order costs at worst a
refused try, never an over-commit. Reading and ranking 10,000 nodes for every placement was
most of a placement's time; a snapshot reads them at most once per ``max_age`` seconds.

One refresh runs at a time: requests that find the snapshot too old while another request is
refreshing it wait for that refresh and share its result (single flight), so a burst does not
read the fleet once per request. The age is measured from when the read *started*, so no
request ranks on nodes read more than ``max_age`` seconds before it asked. ``max_age`` 0 reads
the ledger on every request, as before. ``invalidate`` drops the snapshot at once: the API
calls it after it changed a node, so a node it added is a candidate for the next request.

``read_since`` answers a walk about to refuse: the nodes from a read that *started* after the walk
began (``mark``), so a refusal never rests on a snapshot older than the request. Walks waiting
for such a read at the same time share it, and it becomes the snapshot the next requests rank.
"""

from __future__ import annotations

import asyncio

from fleetgate.domain.capacity.model import NodeState
from fleetgate.domain.capacity.ranking import Candidates, eligible
from fleetgate.domain.ports import Clock, InventoryReader


class NodeSnapshot:
    """The eligible candidates of each pool, ranked from one read of ``ledger.nodes()``."""

    def __init__(
        self, ledger: InventoryReader, clock: Clock, target_load: float, max_age: float = 0.0
    ) -> None:
        if max_age < 0:
            raise ValueError("max_age: must be 0 or more seconds")
        self._ledger = ledger
        self._clock = clock
        self._target_load = target_load
        self.max_age = max_age
        self._read_at: float | None = None
        self._generation = 0
        # Per pool (None: every pool), built on first use from the one read.
        self._pools: dict[str | None, Candidates] = {}
        self._nodes: list[NodeState] = []
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None
        #: How many times the ledger's nodes were read (for tests and diagnosis).
        self.reads = 0
        # Reads started so far, and which of them the snapshot's nodes come from.
        self._started = 0
        self._read_seq = 0
        self._by_name: dict[str, NodeState] | None = None

    async def candidates(self, pool: str | None = None) -> Candidates:
        """The schedulable nodes of ``pool`` (every pool when None), ready to draw an order."""
        if self.max_age <= 0:
            self.reads += 1
            nodes = await self._ledger.nodes()
            return Candidates(eligible(nodes, pool=pool), self._target_load)
        if not self._fresh():
            async with self._refresh_lock():
                if not self._fresh():  # the refresh we waited for may have done it
                    await self._refresh()
        return self._pool(pool)

    def mark(self) -> int:
        """A point in the snapshot's reads: ``read_since(mark)`` waits for a later one."""
        return self._started

    async def read_since(self, mark: int) -> dict[str, NodeState]:
        """Every node of the ledger by name, from a read started after ``mark`` was taken."""
        async with self._refresh_lock():
            if self._read_seq <= mark:  # the snapshot's read began before the walk did
                await self._refresh()
        if self._by_name is None:
            self._by_name = {n.name: n for n in self._nodes}
        return self._by_name

    def invalidate(self) -> None:
        """Forget the snapshot: the next request reads the ledger again."""
        self._read_at = None
        self._generation += 1

    def _fresh(self) -> bool:
        read_at = self._read_at
        return read_at is not None and self._clock.now().timestamp() - read_at < self.max_age

    async def _refresh(self) -> None:
        generation = self._generation
        started = self._clock.now().timestamp()
        self.reads += 1
        self._started += 1
        seq = self._started
        nodes = await self._ledger.nodes()
        self._nodes = nodes
        self._pools = {}
        self._by_name = None
        self._read_seq = seq
        # An invalidate() during the read may concern a change the read did not see.
        self._read_at = started if generation == self._generation else None

    def _pool(self, pool: str | None) -> Candidates:
        candidates = self._pools.get(pool)
        if candidates is None:
            candidates = Candidates(eligible(self._nodes, pool=pool), self._target_load)
            self._pools[pool] = candidates
        return candidates

    def _refresh_lock(self) -> asyncio.Lock:
        # A lock belongs to one event loop; a service outliving its loop (tests, a CLI that
        # runs several) gets a new lock rather than an error.
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock


__all__ = ["NodeSnapshot"]
