"""The capacity-aware simulation (issue 33): a fleet whose nodes carry ledger placements.

A fleet file may add ``fleet.ledger``; the simulation then runs a real capacity ledger (SQLite,
in a temporary directory, on the simulation's virtual clock) beside the fake cluster, the node
sync after every controller round, and the controller's ledger gate, so the report shows the
relocations, any stranded placement and the gate::

    fleet:
      nodes: [...]                 # listed nodes, as usual
      ledger:
        nodeCpu: 4                 # the threads of the nodes the pool launches (default 4)
        enforcement: advisory      # claims: advisory (default) or hard
        nodes:                     # per listed node: its threads and its placements
          big:
            cpu: 8
            placements: [{namespace: team, cpus: 4, memoryMb: 1024, diskGb: 5, count: 5}]
          small-1: {placements: [{cpus: 4, memoryMb: 1024, diskGb: 5, count: 3}]}
        claims: [{namespace: team, cpus: 24, memoryMb: 8192, diskGb: 50}]
        addNodes: [{at: "2024-01-01T06:00:00Z", cpu: 4}]   # an operator adds capacity

A node's threads become its allocatable CPU (memory 4 GiB a thread); the ledger's limits follow
from them by the default overcommit (3 vCPUs a thread). Nothing here touches the fake cluster's
internals: nodes are added through its public ``add_node``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from random import Random
from typing import Any

from fleetgate.apps.controller.shell import PassResult, RotationController
from fleetgate.apps.services.nodesync import NodeSync
from fleetgate.apps.services.relocation import RelocationCheck
from fleetgate.domain.capacity.claims import ClaimRequest, enforcement_of
from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.capacity.dimensions import Resources
from fleetgate.domain.capacity.model import AdmitRequest, check_namespace
from fleetgate.domain.ports import CapacityLedger, SimulatedCluster
from fleetgate.domain.rotation import actions as act
from fleetgate.domain.rotation.annotations import format_timestamp
from fleetgate.domain.rotation.ledger_gate import HELD

GIB_MILLI = 2**30 * 1_000
DEFAULT_THREADS = 4
WORKLOAD_SHARE = 3 / 4
"""Each node's workload Pod asks for this share of the CPU of the smaller of the node and the
nodes the pool launches: a replacement can always host it, and on nodes of one size no
placeholder fits a neighbour."""
CLAIM_SECONDS = 10 * 365 * 24 * 3600


class LedgerError(ValueError):
    """``fleet.ledger`` is invalid; the message names the field and the reason."""


@dataclass(frozen=True)
class Batch:
    """``count`` alike placements of ``size`` for ``namespace``."""

    namespace: str
    size: Resources
    count: int


@dataclass(frozen=True)
class FleetLedger:
    """What ``fleet.ledger`` declares."""

    node_threads: int = DEFAULT_THREADS
    enforcement: str = "advisory"
    threads: Mapping[str, int] = field(default_factory=dict)
    placements: Mapping[str, tuple[Batch, ...]] = field(default_factory=dict)
    claims: tuple[tuple[str, Resources], ...] = ()
    add_nodes: tuple[tuple[datetime, int], ...] = ()


def allocatable(threads: int) -> dict[str, int]:
    """A node of ``threads`` CPUs as the fake cluster takes it (milli-units)."""
    return {"cpu": 1000 * threads, "memory": 4 * threads * GIB_MILLI, "pods": 110_000}


def workload(threads: int) -> dict[str, int]:
    """The workload Pod of a node of ``threads`` CPUs."""
    return {"cpu": int(1000 * threads * WORKLOAD_SHARE)}


def _whole(value: Any, path: str, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= 10_000_000:
        raise LedgerError(f"{path}: must be a whole number from {low}")
    return value


def _size(item: Mapping[str, Any], path: str) -> Resources:
    unknown = set(item) - {"namespace", "cpus", "memoryMb", "diskGb", "count"}
    if unknown:
        raise LedgerError(f"{path}: unknown keys {sorted(unknown)}")
    return Resources(
        _whole(item.get("cpus", 0), f"{path}.cpus"),
        _whole(item.get("memoryMb", 0), f"{path}.memoryMb"),
        _whole(item.get("diskGb", 0), f"{path}.diskGb"),
    )


def _namespace(item: Mapping[str, Any], path: str) -> str:
    try:
        return check_namespace(item.get("namespace", "default"), f"{path}.namespace")
    except ValueError as exc:
        raise LedgerError(str(exc)) from exc


def load_ledger(spec: Any, node_names: Sequence[str], parse_instant: Any) -> FleetLedger | None:
    """Read ``fleet.ledger`` (None when absent) against the fleet's listed node names."""
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        raise LedgerError("fleet.ledger: must be a mapping")
    unknown = set(spec) - {"nodeCpu", "enforcement", "nodes", "claims", "addNodes"}
    if unknown:
        raise LedgerError(f"fleet.ledger: unknown keys {sorted(unknown)}")
    try:
        enforcement = enforcement_of(spec.get("enforcement", "advisory")).value
    except ValueError as exc:
        raise LedgerError(f"fleet.ledger.enforcement: {exc}") from exc
    threads: dict[str, int] = {}
    placements: dict[str, tuple[Batch, ...]] = {}
    nodes = spec.get("nodes") or {}
    if not isinstance(nodes, Mapping):
        raise LedgerError("fleet.ledger.nodes: must map listed node names to their placements")
    for name, item in nodes.items():
        path = f"fleet.ledger.nodes.{name}"
        if name not in node_names:
            raise LedgerError(f"{path}: not a listed node (fleet.nodes)")
        if not isinstance(item, Mapping) or set(item) - {"cpu", "placements"}:
            raise LedgerError(f"{path}: must be a mapping with cpu and placements")
        if "cpu" in item:
            threads[name] = _whole(item["cpu"], f"{path}.cpu", 1)
        batches = []
        for i, p in enumerate(item.get("placements") or []):
            where = f"{path}.placements[{i}]"
            if not isinstance(p, Mapping):
                raise LedgerError(f"{where}: must be a mapping")
            count = _whole(p.get("count", 1), f"{where}.count", 1)
            batches.append(Batch(_namespace(p, where), _size(p, where), count))
        placements[name] = tuple(batches)
    claims = []
    for i, c in enumerate(spec.get("claims") or []):
        where = f"fleet.ledger.claims[{i}]"
        if not isinstance(c, Mapping) or "count" in c:
            raise LedgerError(f"{where}: must be a mapping with namespace, cpus, memoryMb, diskGb")
        claims.append((_namespace(c, where), _size(c, where)))
    added = []
    for i, a in enumerate(spec.get("addNodes") or []):
        where = f"fleet.ledger.addNodes[{i}]"
        if not isinstance(a, Mapping) or "at" not in a or set(a) - {"at", "cpu"}:
            raise LedgerError(f"{where}: must be a mapping with at (an instant) and cpu")
        added.append(
            (parse_instant(a["at"], f"{where}.at"), _whole(a.get("cpu", 4), f"{where}.cpu", 1))
        )
    return FleetLedger(
        node_threads=_whole(spec.get("nodeCpu", DEFAULT_THREADS), "fleet.ledger.nodeCpu", 1),
        enforcement=enforcement,
        threads=threads,
        placements=placements,
        claims=tuple(claims),
        add_nodes=tuple(sorted(added)),
    )


@dataclass
class Tally:
    """What the ledger side of a run did, for the report."""

    placements: int = 0
    relocated: int = 0
    stranded_most: int = 0
    held_passes: int = 0
    held: set[str] = field(default_factory=set)
    events: list[dict[str, Any]] = field(default_factory=list)


class LedgerController(RotationController):
    """The production controller, followed after each round by the node sync (as
    ``controller --sync-ledger`` runs it), with operator node additions at their instants."""

    sync: NodeSync
    tally: Tally
    pending: list[tuple[datetime, int]]
    pool_name: str
    pool_threads: int
    sim_cluster: SimulatedCluster

    async def run_due(self) -> list[PassResult]:
        """A round, then the operator's due additions, then a sync."""
        results = await super().run_due()
        now = self.clock.now()
        for result in results:
            held = {
                a.subject
                for a in result.applied
                if isinstance(a, act.Announce) and a.reason == HELD
            }
            # An event when a node starts being held, not every pass it stays held.
            for node in sorted(held - self.tally.held):
                self.tally.events.append({"at": now, "type": "held-for-capacity", "node": node})
            self.tally.held = held
            if result.step is not None and result.step.report.reason == "ledgerCapacity":
                self.tally.held_passes += 1
        while self.pending and self.pending[0][0] <= now:
            _, threads = self.pending.pop(0)
            name = self.sim_cluster.add_node(
                self.pool_name,
                allocatable=allocatable(threads),
                workload=workload(min(threads, self.pool_threads)),
            )
            self.tally.events.append({"at": now, "type": "node-added", "node": name})
            self.due[self.pool_name] = now  # a watch would wake the pool: look again now
        report = await self.sync.sync()
        if report.moved or report.stranded:
            self.tally.events.append(
                {"at": now, "type": "relocated", "moved": report.moved, "stranded": report.stranded}
            )
        self.tally.relocated += report.moved
        self.tally.stranded_most = max(self.tally.stranded_most, report.stranded)
        return results

    def next_due(self) -> datetime | None:
        """The controller's own next pass, or an operator's addition if sooner."""
        due = super().next_due()
        if self.pending and (due is None or self.pending[0][0] < due):
            return self.pending[0][0]
        return due


class LedgerRun:
    """The ledger beside one simulation: set up, then read for the report."""

    def __init__(
        self,
        spec: FleetLedger,
        ledger: CapacityLedger,
        policy: DemandPolicy,
        cleanup: Callable[[], None],
    ) -> None:
        # The ledger is the simulation world's (``simulate.world.simulation_world``); ``cleanup``
        # removes what it was kept in once the run is read.
        self.spec = spec
        self.ledger = ledger
        self.policy = policy
        self._cleanup = cleanup
        self.tally = Tally()
        self.ids: set[str] = set()

    def node_options(self, name: str) -> dict[str, Any]:
        """The fake cluster's ``add_node`` keywords for a listed node."""
        threads = self.spec.threads.get(name, self.spec.node_threads)
        return {
            "allocatable": allocatable(threads),
            "workload": workload(min(threads, self.spec.node_threads)),
        }

    async def start(
        self, cluster: SimulatedCluster, controller: LedgerController, pool: str, clock: Any
    ) -> None:
        """Bring the nodes into the ledger, place what the fleet declares, arm the gate."""
        await self.ledger.start()
        # Seeded: identical inputs give an identical document.
        sync = NodeSync(
            self.ledger, cluster, clock, self.ledger.event_sink(), self.policy, Random(0)
        )
        await sync.sync()
        for namespace, limit in self.spec.claims:
            made = await self.ledger.create_claim(ClaimRequest(namespace, limit, CLAIM_SECONDS))
            if not made.ok:
                raise LedgerError(f"fleet.ledger.claims: {namespace}: {made.refusal}")
        for node, batches in self.spec.placements.items():
            for batch in batches:
                for _ in range(batch.count):
                    # Ids in declaration order: placements admitted at one instant are read (and
                    # relocated) by id, so the run is the same every time.
                    pid = str(uuid.UUID(int=len(self.ids) + 1))
                    request = AdmitRequest(batch.namespace, node, batch.size, placement_id=pid)
                    out = await self.ledger.admit(request)
                    if out.placement is None:
                        raise LedgerError(
                            f"fleet.ledger.nodes.{node}: its placements do not fit its limits"
                        )
                    self.ids.add(out.placement.id)
        self.tally.placements = len(self.ids)
        controller.sync, controller.tally = sync, self.tally
        controller.pending = list(self.spec.add_nodes)
        controller.pool_name, controller.sim_cluster = pool, cluster
        controller.pool_threads = self.spec.node_threads
        controller.relocation = RelocationCheck(self.ledger, self.policy)

    async def finish(self) -> dict[str, Any]:
        """The report's ``ledger`` part; closes the ledger."""
        try:
            left = {p.id for p in await self.ledger.placements()}
            stranded_now = 0
            live = {n.name for n in await self.ledger.nodes() if n.schedulable}
            for p in await self.ledger.placements():
                stranded_now += p.node not in live
            return {
                "placements": self.tally.placements,
                "relocated": self.tally.relocated,
                "strandedAtMost": self.tally.stranded_most,
                "strandedAtEnd": stranded_now,
                "lost": len(self.ids - left),
                "heldPasses": self.tally.held_passes,
            }
        finally:
            await self.ledger.close()
            self._cleanup()

    def events(self) -> list[dict[str, Any]]:
        """The ledger side's events, instants as RFC3339."""
        return [
            {k: format_timestamp(v) if isinstance(v, datetime) else v for k, v in e.items()}
            for e in self.tally.events
        ]


__all__ = ["FleetLedger", "LedgerController", "LedgerError", "LedgerRun", "load_ledger"]
