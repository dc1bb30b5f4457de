"""The workload generator of ``fleetgate up``: tenants placing and releasing, nodes reporting load.

Every step admits or releases one placement through the normal ``PlacementService``, steering the
cluster's vCPU allocation towards a target that swings between 35% and 80% over a virtual six
hours, so the dashboard shows bursts spreading across nodes, the ``ci`` claim being drawn down
and given back, and the demand spreader refusing and waiving. Node metrics are synthetic: a
node's 1-minute load follows the vCPUs placed on it (with noise and some lag), its schedulable
threads are its hardware threads.
"""

from __future__ import annotations

import math
from datetime import timedelta
from random import Random
from typing import Any

from fleetgate.apps.services.placement import PlacementService
from fleetgate.apps.up.fleet import claim_request, random_request
from fleetgate.domain.capacity.model import NodeMetrics
from fleetgate.domain.ports import CapacityLedger, Clock

SWING = timedelta(hours=6)
GIVE_UP = 5
"""Refusals in a row after which seeding stops: the fleet is as full as it gets."""
LOW, HIGH = 0.35, 0.80
LOAD_PER_VCPU = 0.3
"""Load one placed vCPU puts on its node: busy enough that the demand clause has work to do."""


def target_share(elapsed: timedelta) -> float:
    """The vCPU allocation the generator steers towards, ``elapsed`` virtual time after start."""
    phase = 2 * math.pi * (elapsed / SWING)
    return LOW + (HIGH - LOW) * (0.5 - 0.5 * math.cos(phase))


class Workload:
    """Admits and releases placements and publishes node metrics, one small step at a time."""

    def __init__(
        self,
        ledger: CapacityLedger,
        placements: PlacementService,
        clock: Clock,
        rng: Random | None = None,
        claims: Any = None,
    ) -> None:
        self.ledger = ledger
        self.placements = placements
        self.claims = claims  # the claim service (audit events); without one, the ledger itself
        self.clock = clock
        self.rng = rng or Random()
        self.started = clock.now()
        self.admitted = 0
        self.refused = 0
        self.released = 0
        self._load: dict[str, float] = {}
        # Only what the generator placed is its to release: a placement a person made through
        # the API stays until that person releases it.
        self._mine: set[str] = set()

    async def seed(self, share: float = 0.5, attempts: int = 400) -> None:
        """Create the ``ci`` claim, then place until ``share`` of the vCPUs is allocated."""
        cluster = await self.ledger.cluster()
        create = self.claims.create if self.claims is not None else self.ledger.create_claim
        outcome = await create(claim_request(cluster.total))
        if outcome.refusal is not None:
            raise RuntimeError(f"cannot create the sample claim: {outcome.refusal.message}")
        await self.publish_metrics()
        refusals = 0
        for _ in range(attempts):
            if refusals >= GIVE_UP or await self._allocated_share() >= share:
                return
            refusals = 0 if await self.admit() else refusals + 1

    async def _allocated_share(self) -> float:
        nodes = await self.ledger.nodes()
        limit = sum(n.limits.cpus for n in nodes if n.schedulable)
        used = sum(n.used.cpus for n in nodes)
        return used / limit if limit else 1.0

    async def admit(self) -> bool:
        """Place one random request; False when every candidate refused it."""
        outcome = await self.placements.place(random_request(self.rng))
        if outcome.placement is not None:
            self._mine.add(outcome.placement.id)
            self.admitted += 1
            return True
        self.refused += 1
        return False

    async def release(self) -> bool:
        """Release one random placement the generator made; False when there is none."""
        current = [p for p in await self.ledger.placements() if p.id in self._mine]
        self._mine &= {p.id for p in current}  # moved or released elsewhere: forget them
        if not current:
            return False
        victim = self.rng.choice(current)
        result = await self.placements.release(victim.namespace, victim.id)
        self._mine.discard(victim.id)
        self.released += int(result.released)
        return result.released

    async def step(self) -> None:
        """One admission or release, towards the target allocation of this virtual instant."""
        target = target_share(self.clock.now() - self.started)
        share = await self._allocated_share()
        # Mostly follow the target, sometimes go against it: churn, not a straight line.
        grow = share < target
        if self.rng.random() < 0.25:
            grow = not grow
        if grow:
            await self.admit()
        else:
            await self.release()

    async def publish_metrics(self) -> None:
        """Synthetic 1-minute load for every node: placed vCPUs x load factor, smoothed, noisy."""
        nodes = await self.ledger.nodes()
        for node in nodes:
            threads = node.capacity.threads
            goal = node.used.cpus * LOAD_PER_VCPU * self.rng.uniform(0.8, 1.2)
            previous = self._load.get(node.name, goal)
            load = min(float(threads) * 1.5, 0.6 * previous + 0.4 * goal)
            self._load[node.name] = load
            await self.ledger.publish_metrics(
                node.name, NodeMetrics(cpu_load_1=round(load, 2), cpu_schedulable=threads)
            )
        for gone in set(self._load) - {n.name for n in nodes}:
            del self._load[gone]

    def counters(self) -> dict[str, Any]:
        """What the generator has done so far."""
        return {"admitted": self.admitted, "refused": self.refused, "released": self.released}
