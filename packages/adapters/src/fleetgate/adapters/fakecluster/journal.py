"""What the fake cluster tells the outside as it goes: its history, the Node changes its
listeners hear, and the count of the controller's writes (where an armed crash strikes)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from fleetgate.adapters.fakecluster.faults import ControllerCrash, Faults
from fleetgate.adapters.fakecluster.model import ClusterRecord, Node, NodeChange


class Journal:
    """The cluster's records of what happened, its listeners, and its write count."""

    def __init__(self, faults: Faults) -> None:
        self.history: list[ClusterRecord] = []
        self.breaches: list[ClusterRecord] = []  # claims force-expired before rotation
        self.writes = 0
        self._faults = faults
        self._listeners: list[Callable[[NodeChange], None]] = []

    def record(self, at: datetime, kind: str, name: str, pool: str, **data: str) -> ClusterRecord:
        """Append one happening to the history; return it."""
        record = ClusterRecord(
            at=at, kind=kind, name=name, pool=pool, data=tuple(sorted(data.items()))
        )
        self.history.append(record)
        return record

    def subscribe(self, listener: Callable[[NodeChange], None]) -> Callable[[], None]:
        """Call ``listener`` on every Node change; return a function that unsubscribes it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def notify(self, kind: str, node: Node, at: datetime) -> None:
        """Tell every listener of a change of ``node``."""
        change = NodeChange(kind=kind, node=node.name, pool=node.pool, at=at)
        for listener in list(self._listeners):
            listener(change)

    def wrote(self) -> None:
        """Count one write of the controller's; raise ``ControllerCrash`` if one is armed."""
        self.writes += 1
        left = self._faults.crash_after_writes
        if left is not None:
            if left <= 1:
                self._faults.crash_after_writes = None
                raise ControllerCrash(f"injected crash after write #{self.writes}")
            self._faults.crash_after_writes = left - 1
