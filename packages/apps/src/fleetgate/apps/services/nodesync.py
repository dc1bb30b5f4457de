"""The two halves share nodes: keep the capacity ledger in line with the cluster.

``NodeSync.sync`` observes every pool through the ``ClusterGateway`` port, reads the ledger's
nodes, asks the domain (``fleetgate.domain.nodesync.plan``) what must change and applies it:
nodes join when Ready, are cordoned when the cluster cordons, drains or loses them, have their
placements relocated when they drain, and leave once empty. The rotation controller never calls
the ledger itself; it changes the cluster, and the sync follows — so a controller that crashes
between its write and the ledger's cannot leave the two halves disagreeing for longer than one
sync.

A relocation is the placement walk of ``services.placement`` applied to a move (capacity spec
5.3, "reschedule"): rank every schedulable node but the source, try each with the demand clause,
then one waiver pass over the candidates refused on demand alone; every try is one guarded
``move`` transaction, so a placement is on exactly one node at every instant and no guard is
ever bypassed. A placement no node can take stays where it is (counted, never lost) and is
retried by the next sync.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from random import Random
from typing import Protocol

from fleetgate.apps.services.audit import (
    NODE_CORDONED,
    NODE_JOINED,
    NODE_LEFT,
    NODE_UNCORDONED,
    AuditEvents,
)
from fleetgate.apps.services.walking import try_candidates
from fleetgate.domain import nodesync
from fleetgate.domain.capacity.demand import DemandPolicy, charge
from fleetgate.domain.capacity.errors import NodeBusy, NodeExists, NodeNotFound, PlacementNotFound
from fleetgate.domain.capacity.model import Admission, MoveRequest, NodeState, Placement
from fleetgate.domain.capacity.ranking import rank
from fleetgate.domain.capacity.walk import Attempt, Walk
from fleetgate.domain.events import Event
from fleetgate.domain.ports import Admissions, Clock, ClusterGateway, EventSink, NodeInventory

RESCHEDULE_REFUSED = "reschedule candidate refused by capacity guard"
RESCHEDULE_FAILED = "reschedule failed, every candidate refused by capacity guard"
REDIRECTED = "instance start redirected to another node"

#: Plans per sync: relocations can free a node for removal, which the next round sees.
MAX_ROUNDS = 3


class SyncedLedger(NodeInventory, Admissions, Protocol):
    """What the sync changes: the nodes, and the placements it moves off a leaving node."""


@dataclass
class SyncReport:
    """What one sync did (names of nodes and counts of placements)."""

    joined: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    cordoned: list[str] = field(default_factory=list)
    uncordoned: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    moved: int = 0
    stranded: int = 0

    @property
    def changed(self) -> bool:
        """Whether the ledger changed."""
        return bool(
            self.joined
            or self.left
            or self.cordoned
            or self.uncordoned
            or self.updated
            or self.moved
        )


class NodeSync:
    """Applies the domain's node-sync plan to the ledger; relocates displaced placements."""

    def __init__(
        self,
        ledger: SyncedLedger,
        cluster: ClusterGateway,
        clock: Clock,
        events: EventSink,
        policy: DemandPolicy | None = None,
        rng: Random | None = None,
    ) -> None:
        self._ledger = ledger
        self._cluster = cluster
        self._clock = clock
        self._events = events
        self._event = AuditEvents(clock)
        self.policy = policy or DemandPolicy()
        self._rng = rng or Random()
        self._lock = asyncio.Lock()

    async def observe(self) -> list[nodesync.ClusterNode]:
        """Every node of every pool, as the sync sees it."""
        found: list[nodesync.ClusterNode] = []
        for pool in await self._cluster.list_pools():
            observation = await self._cluster.observe(pool)
            if observation is not None:
                found += nodesync.cluster_nodes(observation)
        return found

    async def plan(self) -> list[nodesync.SyncAction]:
        """What the ledger must do now to agree with the cluster."""
        cluster = await self.observe()
        ledger = await self._ledger.nodes()
        return nodesync.plan(cluster, ledger, await self._held(cluster, ledger))

    async def _held(
        self, cluster: list[nodesync.ClusterNode], ledger: list[NodeState]
    ) -> dict[str, int]:
        # Only a node on its way out needs its placements counted.
        leaving = {n.name for n in cluster if n.draining}
        leaving |= {n.name for n in ledger} - {n.name for n in cluster}
        return {name: len(await self._ledger.placements(node=name)) for name in sorted(leaving)}

    async def sync(self) -> SyncReport:
        """Plan and apply until nothing is left to do (at most ``MAX_ROUNDS`` plans)."""
        report = SyncReport()
        async with self._lock:
            for _ in range(MAX_ROUNDS):
                actions = await self.plan()
                if not actions:
                    break
                before = report.moved
                report.stranded = 0  # what the latest round could not move is what is left
                for action in actions:
                    await self._apply(action, report)
                relocated = any(isinstance(a, nodesync.Relocate) for a in actions)
                if not relocated or report.moved == before:
                    break  # a further plan would change nothing more
        return report

    async def _apply(self, action: nodesync.SyncAction, report: SyncReport) -> None:
        ledger = self._ledger
        try:
            if isinstance(action, nodesync.AddNode):
                note = self._event.node(NODE_JOINED, action.spec.name, pool=action.spec.pool)
                await ledger.add_node(action.spec, audit=lambda _: note)
                report.joined.append(action.spec.name)
                await self._events.emit(note)
            elif isinstance(action, nodesync.UpdateNode):
                await ledger.update_node(action.spec)
                report.updated.append(action.spec.name)
            elif isinstance(action, nodesync.Cordon):
                note = self._event.node(NODE_CORDONED, action.node)
                await ledger.cordon(action.node, audit=lambda _: note)
                report.cordoned.append(action.node)
                await self._events.emit(note)
            elif isinstance(action, nodesync.Uncordon):
                note = self._event.node(NODE_UNCORDONED, action.node)
                await ledger.uncordon(action.node, audit=lambda _: note)
                report.uncordoned.append(action.node)
                await self._events.emit(note)
            elif isinstance(action, nodesync.Relocate):
                moved, stranded = await self.relocate(action.node)
                report.moved += moved
                report.stranded += stranded
            elif isinstance(action, nodesync.RemoveNode):
                note = self._event.node(NODE_LEFT, action.node)
                await ledger.remove_node(action.node, audit=lambda _: note)
                report.left.append(action.node)
                await self._events.emit(note)
        except (NodeExists, NodeNotFound, NodeBusy):
            # Someone else changed the node since the plan was made (an operator through the
            # API, a placement landing first): the next sync re-plans from what is there now.
            pass

    async def relocate(self, source: str) -> tuple[int, int]:
        """Move every placement off ``source``; return (moved, left behind)."""
        moved = stranded = 0
        for placement in await self._ledger.placements(node=source):
            target = await self.relocate_one(placement)
            if target is not None:
                moved += 1
            elif await self._ledger.placement(placement.id) is not None:
                stranded += 1
        return moved, stranded

    async def relocate_one(self, placement: Placement) -> str | None:
        """Re-admit one placement elsewhere through the walk; the node it landed on, or None."""
        source, ns, pid = placement.node, placement.namespace, placement.id
        nodes = await self._ledger.nodes()
        ranked = rank(
            nodesync.relocation_candidates(nodes, source), self.policy.target_load, self._rng
        )
        walk = Walk(tuple(r.node.name for r in ranked))
        demand = charge(placement.resources.cpus, self.policy.demand_per_vcpu)
        events: list[Event] = []

        async def attempt(step: Attempt) -> Admission | None:
            target_load = step.target_load(self.policy.target_load)
            request = MoveRequest(pid, step.node, demand, target_load, True, ns)
            redirected = self._event(
                REDIRECTED,
                pid,
                ns,
                node=source,
                target_node=step.node,
                reason="node draining",
                waived=not step.enforce_demand,
            )
            # The walk's refusals so far and the redirection commit with the move (spec order).
            try:
                result = await self._ledger.move(request, audit=lambda _: [*events, redirected])
            except NodeNotFound:
                return None  # the candidate left the ledger since it was ranked
            if result.denial is not None:
                events.append(self._event.refused(RESCHEDULE_REFUSED, pid, ns, step, result.denial))
            else:
                events.append(redirected)
            return result

        try:
            await try_candidates(walk, attempt)
        except PlacementNotFound:
            await self._events.emit(events)
            return None  # released meanwhile: nothing left to relocate
        if walk.admitted_on is None:
            events.append(self._event.walked(RESCHEDULE_FAILED, pid, ns, walk, node=source))
        await self._events.emit(events)
        return walk.admitted_on


__all__ = [
    "NODE_CORDONED",
    "NODE_JOINED",
    "NODE_LEFT",
    "NODE_UNCORDONED",
    "NodeSync",
    "SyncReport",
]
