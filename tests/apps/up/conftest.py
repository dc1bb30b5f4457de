"""The pieces ``fleetgate up`` runs, built by the composition root as ``up`` builds them, over the
database under test (emptied), the fake cluster and a virtual clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from random import Random
from typing import Any

import pytest
from dependency_injector import providers

from fleetgate.adapters.clock import VirtualClock
from fleetgate.apps.container import Container, build_container
from fleetgate.apps.policyfile import load_policies
from fleetgate.apps.settings import CapacitySettings, ControllerSettings, Settings
from fleetgate.apps.up import fleet
from fleetgate.apps.up.runtime import Cadence, UpRuntime
from fleetgate.apps.up.status import UpStatus
from fleetgate.apps.up.workload import Workload
from tests.conftest import Backend
from tests.ledgers import empty

T0 = datetime(2024, 1, 1, 0, 45, tzinfo=UTC)  # Monday: general open (22-04), batch at 01:00


@dataclass
class Up:
    """The runtime and what it drives."""

    container: Container
    clock: VirtualClock
    runtime: UpRuntime
    status: UpStatus
    workload: Workload
    originals: set[str]

    @property
    def ledger(self) -> Any:
        return self.container.ledger()

    @property
    def cluster(self) -> Any:
        return self.container.cluster()


def up_test_settings(backend: Backend) -> Settings:
    """``up``'s choices on the database under test, with a seeded ranking."""
    return Settings(
        database_url=backend.url,
        database_session_variables=dict(backend.session_variables),
        cluster="fake",
        capacity=CapacitySettings(ranking_seed=11),
        controller=ControllerSettings(policies=[fleet.DEFAULT_POLICIES], leader_election=False),
    )


@pytest.fixture
async def up(backend: Backend) -> AsyncIterator[Up]:
    """The sample fleet (4 nodes) seeded and ready to tick, as ``fleetgate up`` wires it."""
    clock = VirtualClock(T0)
    container = build_container(up_test_settings(backend), clock=clock)
    ledger = container.ledger()
    await ledger.start()
    try:
        await empty(ledger)
        container.event_sink.override(providers.Object(ledger.event_sink()))
        cluster = container.cluster()
        fleet.seed_cluster(
            cluster, fleet.plan_pools(load_policies(fleet.DEFAULT_POLICIES), 4), clock.now()
        )
        originals = set(cluster.claims)
        sync = container.node_sync()
        await sync.sync()
        workload = Workload(
            ledger,
            container.placement_service(),
            clock,
            Random(5),
            claims=container.claim_service(),
        )
        await workload.seed(share=0.4)
        status = UpStatus(
            ledger, cluster, clock, speed=600, target_load=0.75, counters=workload.counters
        )
        runtime = UpRuntime(
            clock=clock,
            cluster=cluster,
            controller=container.rotation_controller(),
            sync=sync,
            workload=workload,
            reconcile=container.reconciler().run_pass,
            status=status,
            speed=600,
            cadence=Cadence(sync=2, workload=1, metrics=2, reconcile=5),
        )
        yield Up(container, clock, runtime, status, workload, originals)
    finally:
        await ledger.close()
