"""The ledger's relocation plans: read once, judged for the rotation's gate, carried out by the
node sync.

:class:`PlanReader` reads what ``capacity.relocation.plan`` needs (every node in one read, the
cluster row, the node's placements, and those of every other node fleetgate took out of service:
stranded there, or of a rotation in progress in any pool), and computes the plan. Both users go
through it, so the plan the gate judges is the plan the node sync makes for the same ledger.

:class:`RelocationCheck` is the rotation controller's side (gate 9, ``ledgerCapacity``): when a
pass over a pool would start a rotation or begin a drain, the controller asks it for the plan of
every pool node that holds placements and steps again with them. Before a drain begins it
reserves the plan's room (``capacity.reservations``: one guarded transaction, all or none), so
no admission can take it between the verdict and the node sync's moves; a plan that no longer
fits is refused there, and the drain waits. The relocation itself is the node sync's, one
guarded ``move`` per planned move, each into its reservation.

Reservations are room already promised: a plan reads the nodes with its own node's reservations
credited back (a new reserve replaces them), and does not count again a placement elsewhere
whose room is already reserved.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

from fleetgate.domain import nodesync
from fleetgate.domain.capacity import reservations
from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.capacity.model import ClusterState, NodeState, Placement
from fleetgate.domain.capacity.relocation import Snapshot, Verdict, plan
from fleetgate.domain.capacity.reservations import Reservation, Reserved
from fleetgate.domain.ports import InventoryReader, PlacementReader, RoomReservations
from fleetgate.domain.rotation.cluster import PoolObservation


class LedgerView(PlacementReader, InventoryReader, RoomReservations, Protocol):
    """What a plan reads (the nodes, the cluster row, the placements, the reservations), and
    the reservations it makes."""


class PlanReader:
    """One read of the ledger for plans: nodes and the cluster row once, each node's placements
    at most once. Make a new one for a fresh read."""

    def __init__(self, ledger: LedgerView, policy: DemandPolicy) -> None:
        self._ledger = ledger
        self.policy = policy
        self._nodes: tuple[NodeState, ...] | None = None
        self._cluster: ClusterState | None = None
        self._held: dict[str, tuple[Placement, ...]] = {}
        self._reserved: tuple[Reservation, ...] | None = None

    async def nodes(self) -> tuple[NodeState, ...]:
        """Every ledger node (read once)."""
        if self._nodes is None:
            self._nodes = tuple(await self._ledger.nodes())
        return self._nodes

    async def placements(self, node: str) -> tuple[Placement, ...]:
        """The placements on ``node`` (read once)."""
        if node not in self._held:
            self._held[node] = tuple(await self._ledger.placements(node=node))
        return self._held[node]

    async def reserved(self) -> tuple[Reservation, ...]:
        """Every stored reservation (read once)."""
        if self._reserved is None:
            self._reserved = tuple(await self._ledger.reservations())
        return self._reserved

    async def snapshot(self, node: str) -> Snapshot:
        """What the plan of ``node`` reads: the room its own reservations hold is its to use,
        and a placement elsewhere whose room is reserved already counts where it is reserved."""
        nodes = await self.nodes()
        if self._cluster is None:
            self._cluster = await self._ledger.cluster()
        held = await self.reserved()
        elsewhere: list[Placement] = []
        for other in nodesync.taken_out(nodes, node):
            elsewhere += await self.placements(other)
        return Snapshot(
            node,
            reservations.without_own(nodes, held, node),
            self._cluster,
            await self.placements(node),
            reservations.unreserved(elsewhere, held),
        )

    async def plan(self, node: str) -> Verdict:
        """The relocation plan of ``node``'s placements."""
        return plan(await self.snapshot(node), self.policy)


class RelocationCheck:
    """Plans, from one ledger read, the relocation of each node of a pool that holds placements."""

    def __init__(
        self,
        ledger: LedgerView,
        policy: DemandPolicy | None = None,
        reservation_ttl: timedelta = reservations.DEFAULT_TTL,
    ) -> None:
        self._ledger = ledger
        self.policy = policy or DemandPolicy()
        #: How long a drain's reservations hold their room unless a move or an end comes first.
        self.reservation_ttl = reservation_ttl
        #: How many passes asked the ledger (for tests and diagnosis).
        self.reads = 0

    async def verdicts(self, obs: PoolObservation) -> dict[str, Verdict]:
        """The plan of each node of ``obs`` that the ledger holds (see ``judge_nodes``)."""
        return await self.judge_nodes([n.name for n in obs.nodes])

    async def judge_nodes(self, names: list[str]) -> dict[str, Verdict]:
        """The plan of each of ``names`` that the ledger holds: an empty one (which fits) for a
        node holding nothing, so that a name missing from the answer is a node the ledger does
        not hold (yet): a surge the node sync has not brought in."""
        self.reads += 1
        reader = PlanReader(self._ledger, self.policy)
        by_name = {n.name: n for n in await reader.nodes()}
        out: dict[str, Verdict] = {}
        for name in names:
            state = by_name.get(name)
            if state is None:
                continue
            held = () if state.used.is_zero() else await reader.placements(name)
            out[name] = await reader.plan(name) if held else Verdict(name, 0)
        return out

    async def reserve(self, verdict: Verdict, now: datetime) -> Reserved:
        """Hold the room of ``verdict``'s planned moves until ``now`` + the reservation TTL
        (replacing what its node held): ``made`` false when a destination no longer has it, and
        the drain must wait."""
        placements = await self._ledger.placements(node=verdict.node)
        wanted = reservations.requests(verdict, placements, now + self.reservation_ttl, self.policy)
        return await self._ledger.reserve(verdict.node, wanted)

    async def release(self, node: str) -> int:
        """End the reservations held for ``node``'s drain (its rotation ended without one)."""
        return await self._ledger.end_reservations(node)


__all__ = ["LedgerView", "PlanReader", "RelocationCheck"]
