"""The collector settled once a process has started: frozen start-up, a larger young generation."""

from __future__ import annotations

import gc
import weakref

from fleetgate.apps.heap import GC_YOUNG_THRESHOLD, settle_heap


def test_settle_heap_freezes_start_up_and_collects_the_young_less_often() -> None:
    threshold = gc.get_threshold()
    try:
        settle_heap()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, *threshold[1:])
        # A cycle made afterwards is still collected.
        cycle: list[object] = []
        cycle.append(cycle)
        ref = weakref.ref(_Node(cycle))
        assert gc.collect() >= 0 and ref() is None
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


class _Node:
    def __init__(self, payload: object) -> None:
        self.me = self
        self.payload = payload
