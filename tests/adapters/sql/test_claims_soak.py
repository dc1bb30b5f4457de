"""A randomized soak: admissions, releases, moves, claim operations and reconcile passes,
sequential and in concurrent bursts, on the database under test.

Every pass must find nothing to correct (the operations keep the counters exact), and no counter
may ever leave its bounds: node usage within its limits, the cluster's claimed limits plus
unclaimed usage within its total, expected demand never negative. Seeded, so a failure replays.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable
from datetime import timedelta

import pytest

from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.domain.capacity.claims import ClaimRequest, ClaimUpdate
from fleetgate.domain.capacity.dimensions import ALLOCATION, Capacity, Resources
from fleetgate.domain.capacity.errors import PlacementNotFound
from fleetgate.domain.capacity.model import AdmitRequest, MoveRequest, NodeSpec
from tests.conftest import Backend
from tests.ledgers import START, open_ledger

NAMESPACES = ("ci-0", "ci-1", "ci-2", "web")
NODES = ("n1", "n2", "n3")
STEPS = 150


class Soak:
    """Random operations against one ledger; remembers nothing the ledger can tell it."""

    def __init__(self, ledger: SqlLedger, clock: VirtualClock, rng: random.Random) -> None:
        self.ledger = ledger
        self.clock = clock
        self.rng = rng
        self.passes = 0
        self.created = 0
        self.admitted = 0

    def size(self) -> Resources:
        r = self.rng
        return Resources(r.randint(0, 6), r.choice([0, 256, 1024, 4096]), r.randint(0, 40))

    async def admit(self) -> None:
        size = self.size()
        admission = await self.ledger.admit(
            AdmitRequest(
                self.rng.choice(NAMESPACES),
                self.rng.choice(NODES),
                size,
                demand=size.cpus * 0.6,
                target_load=self.rng.choice([0.0, 0.75]),
            )
        )
        self.admitted += admission.admitted

    async def release(self) -> None:
        placed = await self.ledger.placements()
        if placed:
            await self.ledger.release(self.rng.choice(placed).id)

    async def move(self) -> None:
        placed = await self.ledger.placements()
        if placed:
            p = self.rng.choice(placed)
            # A release in the same burst may take the placement first.
            with contextlib.suppress(PlacementNotFound):
                await self.ledger.move(MoveRequest(p.id, self.rng.choice(NODES), demand=0.6))

    async def create(self) -> None:
        limit = Resources(
            self.rng.randint(0, 30), self.rng.choice([0, 2048, 8192]), self.rng.randint(0, 150)
        )
        expires = self.rng.choice([30, 120, 600, 3600])
        outcome = await self.ledger.create_claim(
            ClaimRequest(self.rng.choice(NAMESPACES), limit, expires)
        )
        self.created += outcome.ok

    async def update(self) -> None:
        existing = await self.ledger.claims()
        if not existing:
            return
        claim = self.rng.choice(existing)
        d = self.rng.choice(ALLOCATION)
        new = max(
            0, claim.limit.get(d) + self.rng.randint(-8, 8) * (1 if d != "memory_mb" else 512)
        )
        change = (
            ClaimUpdate(expires_in_seconds=self.rng.choice([30, 600]))
            if self.rng.random() < 0.25
            else ClaimUpdate(**{f"limit_{d}": new})
        )
        await self.ledger.update_claim(claim.id, change)

    async def delete(self) -> None:
        existing = await self.ledger.claims()
        if existing:
            await self.ledger.delete_claim(self.rng.choice(existing).id)

    def operations(self) -> list[tuple[int, Callable[[], Awaitable[None]]]]:
        return [
            (8, self.admit),
            (5, self.release),
            (2, self.move),
            (2, self.create),
            (3, self.update),
            (1, self.delete),
        ]

    def pick(self) -> Callable[[], Awaitable[None]]:
        weighted = self.operations()
        return self.rng.choices([op for _, op in weighted], [w for w, _ in weighted])[0]

    async def check(self) -> None:
        """A pass finds nothing to correct, and every counter is within its bounds."""
        summary = (await self.ledger.reconcile()).summary
        self.passes += 1
        assert summary.clean, f"pass {self.passes} corrected drift: {summary}"
        for node in await self.ledger.nodes():
            assert node.expected_demand >= 0
            for d in ALLOCATION:
                assert 0 <= node.used.get(d) <= node.limits.get(d), (node.name, d)
        row = await self.ledger.cluster()
        for d in ALLOCATION:
            committed = row.claimed.get(d) + row.unclaimed_used.get(d)
            assert committed <= row.total.get(d), (d, row)

    async def run(self, steps: int) -> None:
        for step in range(steps):
            roll = self.rng.random()
            if roll < 0.15:
                await asyncio.gather(*(self.pick()() for _ in range(self.rng.randint(2, 6))))
            elif roll < 0.22:
                self.clock.advance(timedelta(seconds=self.rng.randint(1, 200)))
            else:
                await self.pick()()
            if step % 10 == 9:
                await self.check()
        await self.check()


@pytest.mark.parametrize(
    ("seed", "enforcement"), [(11, "advisory"), (12, "hard"), (13, "advisory")]
)
async def test_a_randomized_soak_ends_with_zero_drift(
    backend: Backend, seed: int, enforcement: str
) -> None:
    clock = VirtualClock(START)
    async with open_ledger(backend, clock, enforcement=enforcement) as ledger:
        for name in NODES:
            await ledger.add_node(NodeSpec(name, Capacity(8, 16384, 400)))
        soak = Soak(ledger, clock, random.Random(seed))
        await soak.run(STEPS)
        assert soak.passes >= STEPS // 10
        # The soak really exercised claims and placements, not an empty ledger. How many creates
        # and admissions win depends on how the concurrent bursts interleave, so the floor only
        # rules out a soak that did nothing.
        assert soak.created >= 1 and soak.admitted >= 10, (soak.created, soak.admitted)
        assert (await ledger.reconcile()).summary.clean
