"""The admin's node writes (in-memory ledger): each commits one event, emitted once to each sink."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from fleetgate.adapters.clock import VirtualClock
from fleetgate.apps.eventsink import FanOutEventSink
from fleetgate.apps.services import audit
from fleetgate.apps.services.nodes import NodeAdmin
from fleetgate.apps.services.snapshot import NodeSnapshot
from fleetgate.domain.capacity.dimensions import Capacity
from fleetgate.domain.capacity.errors import NodeNotFound
from fleetgate.domain.capacity.model import NodeSpec
from fleetgate.domain.events import Event
from tests.fakes.ledger import InMemoryLedger

SMALL = Capacity(4, 4096, 40)


class Collected:
    """A sink that keeps what it is given (another sink beside the ledger's own)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    async def emit(self, events: Sequence[Event]) -> None:
        self.events += events


async def test_each_write_is_in_the_table_once_and_reaches_the_other_sinks_once(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    other = Collected()
    admin = NodeAdmin(ledger, clock, FanOutEventSink(other, ledger.event_sink()))
    _, added = await admin.put(NodeSpec("n", SMALL, "p", {"rack": "r1"}))
    _, added_again = await admin.put(NodeSpec("n", Capacity(8, 4096, 40), "p"))
    await admin.cordon("n")
    await admin.uncordon("n")
    await admin.remove("n")
    assert (added, added_again) == (True, False)
    kinds = [
        audit.NODE_JOINED,
        audit.NODE_UPDATED,
        audit.NODE_CORDONED,
        audit.NODE_UNCORDONED,
        audit.NODE_LEFT,
    ]
    recorded = [r.event for r in await ledger.events(subject="n")]
    assert [e.kind for e in recorded] == kinds
    assert [e.kind for e in other.events] == kinds
    assert recorded[0].data == {
        "node": "n",
        "pool": "p",
        "capacity": {"threads": 4, "memory_mb": 4096, "disk_gb": 40},
        "labels": {"rack": "r1"},
    }
    assert recorded[1].data["capacity"]["threads"] == 8 and recorded[1].data["labels"] == {}


async def test_a_write_that_fails_records_nothing(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    other = Collected()
    admin = NodeAdmin(ledger, clock, FanOutEventSink(other, ledger.event_sink()))
    for write in (admin.cordon, admin.uncordon, admin.remove):
        with pytest.raises(NodeNotFound):
            await write("absent")
    assert await ledger.events() == [] and other.events == []


async def test_a_change_drops_the_placements_node_snapshot(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    snapshot = NodeSnapshot(ledger, clock, target_load=0.8, max_age=3600)
    admin = NodeAdmin(ledger, clock, ledger.event_sink(), snapshot)
    await snapshot.candidates()
    await snapshot.candidates()
    assert snapshot.reads == 1  # fresh for an hour
    await admin.put(NodeSpec("n", SMALL))
    await snapshot.candidates()
    assert snapshot.reads == 2  # the write dropped it: the new node counts at once


class AddedMeanwhile:
    """The ledger, but the first look finds no node: as if another writer added it just after."""

    def __init__(self, ledger: InMemoryLedger) -> None:
        self._ledger = ledger
        self.looks = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._ledger, name)

    async def node(self, name: str) -> object:
        self.looks += 1
        return None if self.looks == 1 else await self._ledger.node(name)


async def test_a_put_racing_an_add_replaces_and_records_only_the_replacement(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    await ledger.add_node(NodeSpec("n", SMALL))
    racing = AddedMeanwhile(ledger)
    admin = NodeAdmin(racing, clock, ledger.event_sink())  # type: ignore[arg-type]
    node, added = await admin.put(NodeSpec("n", Capacity(8, 4096, 40)))
    assert not added and node.capacity.threads == 8 and racing.looks == 2
    # The refused add rolled back with its event: only the replacement is recorded.
    assert [r.event.kind for r in await ledger.events()] == [audit.NODE_UPDATED]
