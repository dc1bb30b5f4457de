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
        gate: true                 # the controller's ledger gate (false: drain blind, to compare)
        nodes:                     # per listed node: its threads and its placements
          big:
            cpu: 8
            placements: [{namespace: team, cpus: 4, memoryMb: 1024, diskGb: 5, count: 5}]
          small-1: {workloadCpu: 1, placements: [{cpus: 4, memoryMb: 1024, diskGb: 5, count: 3}]}
        claims: [{namespace: team, cpus: 24, memoryMb: 8192, diskGb: 50}]
        addNodes: [{at: "2024-01-01T06:00:00Z", cpu: 4}]   # an operator adds capacity

The section is read by :mod:`fleetgate.apps.ledgerfile` (the one definition of its format, which
also refuses placements beyond a node's limits). A node's threads become its allocatable CPU
(memory 4 GiB a thread); the ledger's limits follow from them by the default overcommit (3 vCPUs
a thread). Nothing here touches the fake cluster's internals: nodes are added through its public
``add_node``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fleetgate.apps import ledgerfile
from fleetgate.apps.controller.shell import PassResult, RotationController
from fleetgate.apps.ledgerfile import FleetLedger, allocatable
from fleetgate.apps.services.nodesync import NodeSync
from fleetgate.apps.services.relocation import RelocationCheck
from fleetgate.domain.capacity.claims import ClaimRequest
from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.capacity.model import AdmitRequest
from fleetgate.domain.ports import CapacityLedger, SimulatedCluster
from fleetgate.domain.rotation import actions as act
from fleetgate.domain.rotation.annotations import format_timestamp
from fleetgate.domain.rotation.ledger_gate import HELD

DEFAULT_THREADS = ledgerfile.DEFAULT_THREADS
WORKLOAD_SHARE = 3 / 4
"""Each node's workload Pod asks for this share of the CPU of the smaller of the node and the
nodes the pool launches: a replacement can always host it, and on nodes of one size no
placeholder fits a neighbour."""
CLAIM_SECONDS = 10 * 365 * 24 * 3600


class LedgerError(ValueError):
    """The ledger the fleet declares could not be set up (a claim the ledger refused)."""


def workload(threads: int) -> dict[str, int]:
    """The workload Pod of a node of ``threads`` CPUs."""
    return {"cpu": int(1000 * threads * WORKLOAD_SHARE)}


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
        pod = workload(min(threads, self.spec.node_threads))
        if name in self.spec.workload_cpu:  # a node with room a placeholder may land in
            pod = {"cpu": 1000 * self.spec.workload_cpu[name]}
        return {"allocatable": allocatable(threads), "workload": pod}

    async def start(
        self, cluster: SimulatedCluster, controller: LedgerController, pool: str, clock: Any
    ) -> None:
        """Bring the nodes into the ledger, place what the fleet declares, arm the gate."""
        await self.ledger.start()
        # Relocations carry out deterministic plans: identical inputs, identical documents.
        sync = NodeSync(self.ledger, cluster, clock, self.ledger.event_sink(), self.policy)
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
                    if out.placement is None:  # the file's own limits hold, so a claim refused
                        stage = "" if out.denial is None else f" at the {out.denial.stage} stage"
                        exceeded = "" if out.denial is None else sorted(out.denial.exceeded)
                        raise LedgerError(
                            f"{batch.path}: the ledger refused it{stage} {exceeded}".rstrip()
                        )
                    self.ids.add(out.placement.id)
        self.tally.placements = len(self.ids)
        controller.sync, controller.tally = sync, self.tally
        controller.pending = list(self.spec.add_nodes)
        controller.pool_name, controller.sim_cluster = pool, cluster
        controller.pool_threads = self.spec.node_threads
        # The ledger gate, unless the fleet switches it off (controller.ledger_gate_enabled: false).
        controller.relocation = (
            RelocationCheck(self.ledger, self.policy) if self.spec.gate else None
        )

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


__all__ = ["FleetLedger", "LedgerController", "LedgerError", "LedgerRun", "allocatable", "workload"]
