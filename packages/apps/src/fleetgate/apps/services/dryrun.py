"""The dry run of ``place``: which node a placement would land on now, and every refusal.

It draws the candidates the way ``place`` does (the same snapshot, forced node and pool), reads
the current node, cluster and claim rows, and lets the domain's ``trial`` walk them. It never
writes: no charge, no demand, no audit event, and the ranking's seeded sequence that real
placements draw from is left where it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from random import Random
from typing import Protocol

from fleetgate.apps.services.placement import PlacementService, same_request
from fleetgate.domain.capacity.demand import charge
from fleetgate.domain.capacity.model import Placement, PlacementRequest
from fleetgate.domain.capacity.trial import Trial, trial
from fleetgate.domain.ports import ClaimReader, Clock, InventoryReader, PlacementReader


class DryRunReads(InventoryReader, PlacementReader, ClaimReader, Protocol):
    """What a dry run reads: the nodes and cluster row, a replayed placement, the claims."""


@dataclass(frozen=True)
class DryRunResult:
    """A trial, or the earlier placement a repeated ``request_id`` would be answered with."""

    trial: Trial
    replay: Placement | None = None


class DryRun:
    """Answers what ``PlacementService.place`` would do, changing nothing."""

    def __init__(
        self,
        service: PlacementService,
        ledger: DryRunReads,
        clock: Clock,
        *,
        hard_claims: bool,
        seed: int | None = None,
    ) -> None:
        self._service = service
        self._ledger = ledger
        self._clock = clock
        self._hard = hard_claims
        self._seed = seed

    async def place(self, request: PlacementRequest) -> DryRunResult:
        """What admitting ``request`` would do now."""
        ns = request.namespace
        if request.request_id is not None:
            existing = await self._ledger.placement_by_request(ns, request.request_id)
            if existing is not None:  # a different request under this id: 409, as for real
                replay = same_request(existing, request)
                return DryRunResult(Trial(node=replay.node), replay=replay)
        candidates = await self._service.candidates(request)
        # Its own generator, so a dry run never moves the sequence real placements draw from.
        order = [r.node.name for r in candidates.order(Random(self._seed))]
        drawn = set(order)
        nodes = {n.name: n for n in await self._ledger.nodes() if n.name in drawn}
        now = self._clock.now()
        active = [c for c in await self._ledger.claims(ns) if c.is_active(now)]
        policy = self._service.policy
        found = trial(
            request.resources,
            charge(request.resources.cpus, policy.demand_per_vcpu),
            policy.target_load,
            order,
            nodes,
            await self._ledger.cluster(),
            active[0] if active else None,
            hard=self._hard,
        )
        return DryRunResult(found)
