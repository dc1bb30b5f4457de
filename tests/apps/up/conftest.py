"""The pieces ``fleetgate up`` runs, built by the composition root's ``up_container`` as ``up``
builds them (with a seeded workload and fixed cadences), over the database under test (emptied),
the fake cluster and a virtual clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from random import Random
from typing import Any

import pytest

from fleetgate.adapters.clock import VirtualClock
from fleetgate.apps.container import Container, up_container
from fleetgate.apps.policyfile import load_policies
from fleetgate.apps.settings import CapacitySettings, Settings
from fleetgate.apps.up import fleet
from fleetgate.apps.up.command import up_settings
from fleetgate.apps.up.runtime import Cadence, UpRuntime, seed
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
    """``up``'s own choices (``up_settings``), on the database under test, seeded ranking."""
    chosen = up_settings(
        Settings(capacity=CapacitySettings(ranking_seed=11)), fleet.DEFAULT_POLICIES, 0
    )
    return chosen.model_copy(
        update={
            "database_url": backend.url,
            "database_session_variables": dict(backend.session_variables),
        }
    )


@pytest.fixture
async def up(backend: Backend) -> AsyncIterator[Up]:
    """The sample fleet (4 nodes) seeded and ready to tick, as ``fleetgate up`` wires it."""
    container = up_container(
        up_test_settings(backend),
        T0,
        600,
        up_rng=Random(5),
        up_cadence=Cadence(sync=2, workload=1, metrics=2, reconcile=5),
    )
    ledger = container.ledger()
    await ledger.start()
    try:
        await empty(ledger)
        plans = fleet.plan_pools(load_policies(fleet.DEFAULT_POLICIES), 4)
        cluster, clock = container.simulated_cluster(), container.clock()
        await seed(cluster, clock, container.node_sync(), container.up_workload(), plans, 0.4)
        originals = set(cluster.claims)
        yield Up(
            container,
            clock,
            container.up_runtime(),
            container.up_status(),
            container.up_workload(),
            originals,
        )
    finally:
        await ledger.close()
