"""What the fake cluster tells the outside: its history, its listeners, its write count."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fleetgate.adapters.fakecluster.faults import ControllerCrash, Faults
from fleetgate.adapters.fakecluster.journal import Journal
from fleetgate.adapters.fakecluster.model import Node, NodeChange

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def test_a_record_keeps_its_data_sorted_and_is_appended_to_the_history() -> None:
    journal = Journal(Faults())
    record = journal.record(T0, "claim-created", "a-1", "a", z="1", b="2")
    assert journal.history == [record] and record.data == (("b", "2"), ("z", "1"))


def test_listeners_hear_each_node_change_until_they_unsubscribe() -> None:
    journal = Journal(Faults())
    heard: list[NodeChange] = []
    unsubscribe = journal.subscribe(heard.append)
    node = Node(name="a-1", pool="a", allocatable={}, labels={})
    journal.notify("ready", node, T0)
    unsubscribe()
    journal.notify("removed", node, T0)
    assert heard == [NodeChange(kind="ready", node="a-1", pool="a", at=T0)]


def test_an_armed_crash_strikes_after_the_counted_write_and_only_once() -> None:
    faults = Faults()
    journal = Journal(faults)
    faults.crash_after_writes = 2
    journal.wrote()
    with pytest.raises(ControllerCrash, match="write #2"):
        journal.wrote()
    journal.wrote()
    assert journal.writes == 3 and faults.crash_after_writes is None
