"""The composition root picks adapters through the plugins by configuration."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from fleetgate.apps.container import build_container, up_container
from fleetgate.apps.services.simulation import Simulator
from fleetgate.apps.settings import Settings
from fleetgate.apps.up.runtime import cadence_for
from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.capacity.dimensions import Overcommit
from fleetgate.domain.ports import Clock, SimulatedCluster
from tests.ports import assert_implements

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def test_the_container_builds_the_configured_adapters(tmp_sqlite_url: str) -> None:
    c = build_container(Settings(database_url=tmp_sqlite_url, cluster="fake"))
    ledger, cluster = c.ledger(), c.cluster()
    assert type(ledger).__module__.startswith("fleetgate.adapters.sql")
    assert type(cluster).__module__.startswith("fleetgate.adapters.fakecluster")
    assert_implements(c.clock(), Clock)
    # Singletons: one ledger per process.
    assert c.ledger() is ledger


def test_overrides_replace_a_provider() -> None:
    marker = object()
    c = build_container(Settings(), cluster=marker)
    assert c.cluster() is marker


def test_one_demand_policy_serves_the_services_and_the_ledger(tmp_sqlite_url: str) -> None:
    settings = Settings(database_url=tmp_sqlite_url, capacity={"demand_decay_seconds": 90.0})
    c = build_container(settings)
    policy = c.demand_policy()
    assert policy.decay_seconds == 90.0
    assert c.ledger().demand is policy  # type: ignore[attr-defined]
    assert c.placement_service().policy is policy and c.node_sync().policy is policy


def test_the_capacity_defaults_are_the_domains() -> None:
    capacity = Settings().capacity
    assert DemandPolicy() == DemandPolicy(
        capacity.target_load, capacity.demand_per_vcpu, capacity.demand_decay_seconds
    )
    assert Overcommit() == Overcommit(
        capacity.cpu_overcommit, capacity.memory_overcommit, capacity.disk_overcommit
    )


def test_the_simulator_gets_a_cluster_that_runs_in_virtual_time() -> None:
    c = build_container(Settings(cluster="fake"))
    assert isinstance(c.simulated_cluster(), SimulatedCluster)
    real = build_container(Settings(), cluster=object())
    with pytest.raises(TypeError, match="cluster: 'fake' cannot run in virtual time"):
        real.simulated_cluster()


def test_the_controller_is_wired_from_the_settings_alone(tmp_path: Path) -> None:
    settings = Settings(cluster="fake", controller={"namespace": "ops", "priority_class": "low"})
    c = build_container(settings)
    controller = c.rotation_controller()
    assert controller.config.namespace == "ops" and controller.priority_class == "low"
    assert controller.cluster is c.cluster() and controller.events is c.event_sink()


def test_the_controller_namespace_reaches_a_cluster_backend_through_the_hook(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLEETGATE_PLUGINS", "karpenter")
    settings = Settings(cluster="karpenter", controller={"namespace": "ops"})
    assert build_container(settings).cluster().options.namespace == "ops"  # type: ignore[attr-defined]
    pinned = Settings(cluster="karpenter", cluster_options={"namespace": "elsewhere"})
    assert build_container(pinned).cluster().options.namespace == "elsewhere"  # type: ignore[attr-defined]


def test_the_simulator_is_the_one_simulate_world_builds() -> None:
    assert isinstance(build_container(Settings()).simulator(), Simulator)


def test_up_drives_this_processs_controller_sync_and_reconciler_at_its_speed(
    tmp_sqlite_url: str,
) -> None:
    c = up_container(Settings(database_url=tmp_sqlite_url, cluster="fake"), T0, 600.0)
    runtime = c.up_runtime()
    assert runtime.controller is c.rotation_controller() and runtime.sync is c.node_sync()
    assert runtime.workload is c.up_workload() and runtime.status is c.up_status()
    assert runtime.cluster is c.simulated_cluster() and runtime.clock.now() == T0
    assert runtime.speed == c.up_status().speed == 600.0
    assert runtime.cadence == cadence_for(c.settings(), 600.0)
    assert c.up_workload().placements is c.placement_service()
    # Rotation events go to the audit trail, beside the capacity events.
    assert c.rotation_controller().events is c.capacity_events()
