"""The queue of timed happenings: time order, ties in queueing order, cancelled ones skipped,
and one queued while another is handled met in its turn."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from fleetgate.adapters.fakecluster.timeline import Timeline

T0 = datetime(2024, 1, 1, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def test_happenings_come_in_time_order_and_ties_in_the_order_queued() -> None:
    timeline = Timeline(itertools.count())
    timeline.at(T0 + 2 * MINUTE, "drained", "b")
    timeline.at(T0 + MINUTE, "launch", "a")
    timeline.at(T0 + MINUTE, "expire", "a")
    due = list(timeline.due(T0 + MINUTE, lambda kind, name: True))
    assert due == [(T0 + MINUTE, "launch", "a"), (T0 + MINUTE, "expire", "a")]
    assert timeline.next_at(lambda kind, name: True) == T0 + 2 * MINUTE


def test_a_happening_that_no_longer_applies_is_skipped_and_dropped() -> None:
    timeline = Timeline(itertools.count())
    timeline.at(T0 + MINUTE, "launch", "gone")
    timeline.at(T0 + 3 * MINUTE, "launch", "kept")
    still = {"kept"}
    assert timeline.next_at(lambda kind, name: name in still) == T0 + 3 * MINUTE
    still.add("gone")  # dropped from the queue when it was found not to apply
    assert list(timeline.due(T0 + 3 * MINUTE, lambda kind, name: name in still)) == [
        (T0 + 3 * MINUTE, "launch", "kept")
    ]
    assert timeline.next_at(lambda kind, name: True) is None


def test_one_queued_while_another_is_handled_is_met_in_its_turn() -> None:
    timeline = Timeline(itertools.count())
    timeline.at(T0 + MINUTE, "launch", "a")
    seen = []
    for at, kind, name in timeline.due(T0 + 5 * MINUTE, lambda kind, name: True):
        seen.append((kind, name))
        if name == "a":
            timeline.at(at + MINUTE, "batch", "pool")
            timeline.at(T0 + 9 * MINUTE, "expire", "a")  # after now: stays queued
    assert seen == [("launch", "a"), ("batch", "pool")]
    assert timeline.next_at(lambda kind, name: True) == T0 + 9 * MINUTE
