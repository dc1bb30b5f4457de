"""The two halves share nodes: keep the capacity ledger in line with the cluster.

``NodeSync.sync`` observes every pool through the ``ClusterGateway`` port, reads the ledger's
nodes, asks the domain (``fleetgate.domain.nodesync.plan``) what must change and applies it:
nodes join when Ready, are cordoned when the cluster cordons, drains or loses them, have their
placements relocated when they drain, and leave once empty. The rotation controller never calls
the ledger itself; it changes the cluster, and the sync follows — so a controller that crashes
between its write and the ledger's cannot leave the two halves disagreeing for longer than one
sync.

A relocation first moves each placement into the room the rotation reserved for it before the
drain began (``capacity.reservations``: the move consumes the reservation in its transaction and
charges the destination nothing more), then carries out the node's relocation plan for whatever
is left (``capacity.relocation.plan``, read through ``services.relocation.PlanReader``): the
placement walk of capacity spec 5.3 ("reschedule"), decided once and deterministically, largest
placements first, so the rotation's ledger gate judged exactly this relocation. Every move is one
guarded ``move`` transaction, so a placement is on exactly one node at every instant and no
guard is ever bypassed. A placement no node can take, or whose planned room was taken since
(no reservation held it), stays where it is (counted, never lost) and is planned again by the
next sync.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Protocol

from fleetgate.apps.services.audit import (
    NODE_CORDONED,
    NODE_JOINED,
    NODE_LEFT,
    NODE_UNCORDONED,
    AuditEvents,
)
from fleetgate.apps.services.relocation import PlanReader
from fleetgate.domain import nodesync
from fleetgate.domain.capacity.demand import DemandPolicy, charge
from fleetgate.domain.capacity.errors import NodeBusy, NodeExists, NodeNotFound, PlacementNotFound
from fleetgate.domain.capacity.model import MoveRequest, NodeState
from fleetgate.domain.capacity.relocation import Move, Verdict
from fleetgate.domain.capacity.walk import Attempt
from fleetgate.domain.events import Level
from fleetgate.domain.ports import (
    Admissions,
    Clock,
    ClusterGateway,
    EventSink,
    NodeInventory,
    RoomReservations,
)

RESCHEDULE_REFUSED = "reschedule candidate refused by capacity guard"
RESCHEDULE_FAILED = "reschedule failed, every candidate refused by capacity guard"
REDIRECTED = "instance start redirected to another node"

#: Plans per sync: relocations can free a node for removal, which the next round sees.
MAX_ROUNDS = 3


class SyncedLedger(NodeInventory, Admissions, RoomReservations, Protocol):
    """What the sync changes: the nodes, and the placements it moves off a leaving node (into
    the room reserved for them)."""


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
    ) -> None:
        self._ledger = ledger
        self._cluster = cluster
        self._clock = clock
        self._events = events
        self._event = AuditEvents(clock)
        self.policy = policy or DemandPolicy()
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
        """Move ``source``'s placements into their reservations, then carry out the relocation
        plan of what is left; return (moved, left behind).

        The plan is ``capacity.relocation.plan`` over a fresh read (``PlanReader``): the very
        plan the rotation's ledger gate judged and reserved for the same ledger. Each move is
        one guarded ``move`` onto its node (the demand clause waived where the plan waived it);
        a move refused because the room was taken since, and a placement the plan strands, stay
        where they are, counted, and are planned again by the next sync.
        """
        moved = 0
        for held in await self._ledger.reservations(source):
            # Into its reservation: the room is the placement's already, so this move cannot be
            # refused for room (a destination that left the ledger took the room with it).
            moved += await self._move(source, Move(held.placement, held.node)) is True
        rest, stranded = await self.carry_out(
            source, await PlanReader(self._ledger, self.policy).plan(source)
        )
        return moved + rest, stranded

    async def carry_out(self, source: str, verdict: Verdict) -> tuple[int, int]:
        """Make the moves of ``verdict`` (the plan of ``source``); return (moved, left behind).
        A placement released or moved since the plan was read is simply not there to move."""
        moved = stranded = 0
        for move in verdict.moves:
            outcome = await self._move(source, move)
            moved += outcome is True
            stranded += outcome is False
        for pid in verdict.stranded:
            placement = await self._ledger.placement(pid)
            if placement is None or placement.node != source:
                continue  # released (or moved by someone else) since the plan was read
            stranded += 1
            walk = verdict.walks[pid]
            await self._events.emit(
                [self._event.walked(RESCHEDULE_FAILED, pid, placement.namespace, walk, node=source)]
            )
        return moved, stranded

    async def _move(self, source: str, move: Move) -> bool | None:
        """One planned move: True when made, False when refused (the placement stays), None when
        there was nothing left to move (released meanwhile)."""
        placement = await self._ledger.placement(move.placement)
        if placement is None or placement.node != source:
            return None  # released, or already moved, since the plan was read
        ns, pid = placement.namespace, placement.id
        step = Attempt(move.target, enforce_demand=not move.waived)
        target_load = step.target_load(self.policy.target_load)
        demand = charge(placement.resources.cpus, self.policy.demand_per_vcpu)
        request = MoveRequest(pid, move.target, demand, target_load, True, ns)
        redirected = self._event(
            REDIRECTED,
            pid,
            ns,
            node=source,
            target_node=move.target,
            reason="node draining",
            waived=move.waived,
        )
        try:
            result = await self._ledger.move(request, audit=lambda _: [redirected])
        except PlacementNotFound:
            return None
        except NodeNotFound:  # the planned node left the ledger since the plan was read
            result = None
        if result is not None and result.denial is None:
            await self._events.emit([redirected])
            return True
        denials = {}
        events = []
        if result is not None and result.denial is not None:
            events.append(self._event.refused(RESCHEDULE_REFUSED, pid, ns, step, result.denial))
            denials[move.target] = result.denial.as_dict()
        failed = self._event(
            RESCHEDULE_FAILED,
            pid,
            ns,
            Level.WARNING,
            node=source,
            candidates=[move.target],
            denials=denials,
        )
        await self._events.emit([*events, failed])
        return False


__all__ = [
    "NODE_CORDONED",
    "NODE_JOINED",
    "NODE_LEFT",
    "NODE_UNCORDONED",
    "NodeSync",
    "SyncReport",
]
