"""The ledger's relocation plans: read once, judged for the rotation's gate, carried out by the
node sync.

:class:`PlanReader` reads what ``capacity.relocation.plan`` needs (every node in one read, the
cluster row, the node's placements, and those of every other node fleetgate took out of service:
stranded there, or of a rotation in progress in any pool), and computes the plan. Both users go
through it, so the plan the gate judges is the plan the node sync makes for the same ledger.

:class:`RelocationCheck` is the rotation controller's side (gate 9, ``ledgerCapacity``): when a
pass over a pool would start a rotation or begin a drain, the controller asks it for the plan of
every pool node that holds placements and steps again with them. Reads, never writes: the
relocation itself is the node sync's, one guarded ``move`` per planned move, so a plan that has
gone stale by the time it is carried out can cost a stranded placement (kept where it is,
counted and planned again) but never an over-committed node.
"""

from __future__ import annotations

from typing import Protocol

from fleetgate.domain import nodesync
from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.capacity.model import ClusterState, NodeState, Placement
from fleetgate.domain.capacity.relocation import Snapshot, Verdict, plan
from fleetgate.domain.ports import InventoryReader, PlacementReader
from fleetgate.domain.rotation.cluster import PoolObservation


class LedgerView(PlacementReader, InventoryReader, Protocol):
    """What a plan reads: the nodes, the cluster row and the placements."""


class PlanReader:
    """One read of the ledger for plans: nodes and the cluster row once, each node's placements
    at most once. Make a new one for a fresh read."""

    def __init__(self, ledger: LedgerView, policy: DemandPolicy) -> None:
        self._ledger = ledger
        self.policy = policy
        self._nodes: tuple[NodeState, ...] | None = None
        self._cluster: ClusterState | None = None
        self._held: dict[str, tuple[Placement, ...]] = {}

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

    async def snapshot(self, node: str) -> Snapshot:
        """What the plan of ``node`` reads."""
        nodes = await self.nodes()
        if self._cluster is None:
            self._cluster = await self._ledger.cluster()
        elsewhere: list[Placement] = []
        for other in nodesync.taken_out(nodes, node):
            elsewhere += await self.placements(other)
        return Snapshot(node, nodes, self._cluster, await self.placements(node), tuple(elsewhere))

    async def plan(self, node: str) -> Verdict:
        """The relocation plan of ``node``'s placements."""
        return plan(await self.snapshot(node), self.policy)


class RelocationCheck:
    """Plans, from one ledger read, the relocation of each node of a pool that holds placements."""

    def __init__(self, ledger: LedgerView, policy: DemandPolicy | None = None) -> None:
        self._ledger = ledger
        self.policy = policy or DemandPolicy()
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


__all__ = ["LedgerView", "PlanReader", "RelocationCheck"]
