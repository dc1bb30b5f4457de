"""The admin's node writes (the API's ``/v1/nodes``): add or replace, remove, cordon, uncordon.

Each write is one ledger transaction that commits its one audit event with it (the ledger's
``audit``), named as node sync names the same change (``services.audit``), so the trail reads
the same whether the cluster or an operator changed a node. After a change the placements'
node snapshot is dropped: a node this server added, cordoned or removed counts from the next
request on, not a snapshot later (published metrics only reorder candidates, which the
snapshot's staleness bound allows, so they are not written here).
"""

from __future__ import annotations

from dataclasses import asdict

from fleetgate.apps.services.audit import (
    NODE_CORDONED,
    NODE_JOINED,
    NODE_LEFT,
    NODE_UNCORDONED,
    NODE_UPDATED,
    AuditEvents,
    Trail,
)
from fleetgate.apps.services.snapshot import NodeSnapshot
from fleetgate.domain.capacity.errors import NodeExists, NodeNotFound
from fleetgate.domain.capacity.model import NodeSpec, NodeState
from fleetgate.domain.events import Event
from fleetgate.domain.ports import Clock, EventSink, NodeInventory

#: Rounds of add-or-replace: one may race a concurrent add or remove, the next settles it.
PUT_ROUNDS = 2


class NodeAdmin:
    """Writes nodes for the admin, each with its audit event in the write's transaction."""

    def __init__(
        self,
        ledger: NodeInventory,
        clock: Clock,
        events: EventSink,
        snapshot: NodeSnapshot | None = None,
    ) -> None:
        self._ledger = ledger
        self._events = events
        self._event = AuditEvents(clock)
        self._snapshot = snapshot

    async def put(self, spec: NodeSpec) -> tuple[NodeState, bool]:
        """Add the node, or replace its capacity, pool and labels (its counters are kept);
        whether it was added. ``NodeExists``/``NodeNotFound`` when it kept changing under us."""
        for _ in range(PUT_ROUNDS - 1):
            try:
                return await self._put_once(spec)
            except (NodeExists, NodeNotFound):
                continue  # added or removed meanwhile: look again
        return await self._put_once(spec)

    async def _put_once(self, spec: NodeSpec) -> tuple[NodeState, bool]:
        added = await self._ledger.node(spec.name) is None
        kind = NODE_JOINED if added else NODE_UPDATED
        labels = dict(spec.labels)
        declared = {"pool": spec.pool, "capacity": asdict(spec.capacity), "labels": labels}
        trail = Trail[NodeState](lambda _: self._event.node(kind, spec.name, **declared))
        write = self._ledger.add_node if added else self._ledger.update_node
        node = await write(spec, audit=trail.events_of)
        await self._changed(trail.delivered(node))
        return node, added

    async def remove(self, name: str) -> None:
        """Remove a node that holds no placement (``NodeBusy`` otherwise)."""
        trail = Trail[None](lambda _: self._event.node(NODE_LEFT, name))
        await self._ledger.remove_node(name, audit=trail.events_of)
        await self._changed(trail.delivered(None))

    async def cordon(self, name: str) -> NodeState:
        """Stop admitting onto the node (its placements stay)."""
        trail = Trail[NodeState](lambda _: self._event.node(NODE_CORDONED, name))
        node = await self._ledger.cordon(name, audit=trail.events_of)
        await self._changed(trail.delivered(node))
        return node

    async def uncordon(self, name: str) -> NodeState:
        """Admit onto the node again."""
        trail = Trail[NodeState](lambda _: self._event.node(NODE_UNCORDONED, name))
        node = await self._ledger.uncordon(name, audit=trail.events_of)
        await self._changed(trail.delivered(node))
        return node

    async def _changed(self, events: list[Event]) -> None:
        if self._snapshot is not None:
            self._snapshot.invalidate()
        # Already in the table (the change's transaction): emitted now to the other sinks only.
        await self._events.emit(events)


__all__ = ["PUT_ROUNDS", "NodeAdmin"]
