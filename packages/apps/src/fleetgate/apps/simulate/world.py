"""The world each simulation runs in: the fake cluster, a virtual clock, the production controller.

Every simulation (``fleetgate simulate``, ``POST /v1/rotation/simulate``, the What-if page) gets a
fresh world from :func:`simulation_world`, and the composition root's ``simulator`` is
:func:`simulator`. The world is put together here, from the same pieces the container wires for
a live controller, rather than by the container itself: ``fleetgate simulate`` runs one
simulation and exits, and the container would import dependency-injector, FastAPI (through its
wiring) and pydantic-settings into it for nothing, about half of its start-up
(docs/decisions.md). The cluster is still reached through the plugin manager, like any backend.
"""

from __future__ import annotations

import tempfile
from datetime import datetime
from pathlib import Path

import pluggy
from prometheus_client import CollectorRegistry

from fleetgate.adapters import plugins
from fleetgate.adapters.clock import VirtualClock
from fleetgate.apps.controller.metrics import RotationMetrics
from fleetgate.apps.controller.shell import RotationController
from fleetgate.apps.ledgerfile import FleetLedger
from fleetgate.apps.services.simulation import SimulationWorld, Simulator
from fleetgate.apps.simulate.capacity import LedgerController, LedgerRun
from fleetgate.apps.simulate.recorder import Recorder
from fleetgate.apps.simulate.run import QUIET
from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.ports import Clock, SimulatedCluster
from fleetgate.domain.rotation.policy import RotationPolicy

__all__ = ["simulation_world", "simulator"]

CLUSTER = "fake"
"""The cluster backend a simulation runs on (the plugin's name)."""


def simulation_world(
    start: datetime, policy: RotationPolicy, with_ledger: bool = False
) -> SimulationWorld:
    """A fresh world for one simulation: the fake cluster (through the plugin manager, like any
    backend), virtual time from ``start``, the production controller governed by ``policy``
    (followed by the node sync and the ledger gate, ``with_ledger``: issue 33)."""
    # Only the plugins a simulation runs on: loading every backend's would import SQLAlchemy,
    # both SQL dialects and the Kubernetes client for nothing (a third of a second a run).
    pm = plugins.plugin_manager(allow={CLUSTER, "sqlite"} if with_ledger else {CLUSTER})
    clock = VirtualClock(start)
    cluster = plugins.make_cluster(pm, CLUSTER, {}, clock)
    if not isinstance(cluster, SimulatedCluster):
        raise TypeError(f"cluster: {CLUSTER!r} cannot run in virtual time")
    recorder = Recorder(clock, cluster)
    kind = LedgerController if with_ledger else RotationController

    async def governing() -> list[RotationPolicy]:
        return [policy]

    # The production controller, governed by the simulated policy only; it reports to the
    # recorder (its events, each pass) and to metrics of its own, and logs nothing (its log
    # lines become the simulation's events).
    controller = kind(
        cluster,
        governing,
        clock,
        recorder,
        RotationMetrics(CollectorRegistry()),
        on_pass=recorder.on_pass,
        logger=QUIET,
    )
    return SimulationWorld(
        clock=clock,
        cluster=cluster,
        controller=controller,
        recorder=recorder,
        ledgers=lambda spec: _ledger(pm, clock, spec),
    )


def _ledger(pm: pluggy.PluginManager, clock: Clock, spec: FleetLedger) -> LedgerRun:
    # A simulation's ledger: SQLite in a directory of its own, on the run's virtual clock,
    # through the plugin manager like any backend; the run removes the directory when read.
    workdir = tempfile.TemporaryDirectory(prefix="fleetgate-sim-")
    url = f"sqlite+aiosqlite:///{Path(workdir.name) / 'ledger.db'}"
    options = {"capacity": {}, "claims": {"enforcement": spec.enforcement}}
    policy = DemandPolicy()
    ledger = plugins.make_ledger(pm, url, options, clock, policy)
    return LedgerRun(spec, ledger, policy, workdir.cleanup)


def simulator() -> Simulator:
    """The simulator: each run in a fresh :func:`simulation_world`."""
    return Simulator(simulation_world)
