"""A fake cluster, a policy and the real controller on one virtual clock, for the tests."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import CollectorRegistry

from fleetgate.adapters import plugins
from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.fakecluster.cluster import FakeCluster
from fleetgate.apps.controller.metrics import RotationMetrics
from fleetgate.apps.controller.shell import PassResult, RotationController
from fleetgate.apps.simulate.engine import VirtualDriver
from fleetgate.domain.events import Event
from fleetgate.domain.rotation.labelselector import LabelSelector
from fleetgate.domain.rotation.policy import RotationPolicy, Surge
from fleetgate.domain.rotation.windows import MaintenanceWindow
from tests.nrc import assert_recorded_as_nrc_does

T0 = datetime(2024, 1, 1, tzinfo=UTC)  # a Monday
ALL_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
WORKLOAD = {"cpu": 3_000}


def policy(
    name: str = "default",
    *,
    windows: Sequence[MaintenanceWindow] = (MaintenanceWindow("UTC", ALL_DAYS, "00:00", "24:00"),),
    match_labels: dict[str, str] | None = None,
    k: int = 2,
    **surge: Any,
) -> RotationPolicy:
    """A policy with the given windows (default: always open), K and surge fields."""
    return RotationPolicy(
        name=name,
        min_rotation_chances=k,
        node_pool_selector=LabelSelector(match_labels=match_labels or {}),
        maintenance_windows=tuple(windows),
        surge=Surge(**surge),
    )


class ListSink:
    """An EventSink that keeps what it is given."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    async def emit(self, events: Sequence[Event]) -> None:
        for event in events:  # every Event any controller test makes is shaped as NRC's
            assert_recorded_as_nrc_does(event)
        self.events.extend(events)

    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]


class World:
    """One pool ``pool`` on a fake cluster, the controller, and the virtual-time driver."""

    def __init__(
        self,
        policies: Sequence[RotationPolicy] | RotationPolicy | None = None,
        *,
        start: datetime = T0,
        expire_after: str | None = "14d",
        tgp: str | None = "1h",
        provisioning: str = "2m",
        drain: str = "5m",
        nrc_metrics: bool = False,
        **pool: Any,
    ) -> None:
        self.nrc_metrics = nrc_metrics
        self.clock = VirtualClock(start)
        pm = plugins.plugin_manager(allow={"fake"})
        self.cluster: FakeCluster = plugins.make_cluster(pm, "fake", {}, self.clock)
        self.cluster.add_pool(
            "pool",
            expire_after=expire_after,
            termination_grace_period=tgp,
            provisioning_delay=provisioning,
            drain_time=drain,
            **pool,
        )
        if policies is None:
            policies = [policy()]
        elif isinstance(policies, RotationPolicy):
            policies = [policies]
        self.policies = list(policies)
        self.events = ListSink()
        self.passes: list[PassResult] = []
        self.restart()

    def restart(self) -> RotationController:
        """A brand-new controller process on the same cluster (fresh memory and metrics)."""
        self.registry = CollectorRegistry()

        async def policies() -> list[RotationPolicy]:
            return self.policies

        self.controller = RotationController(
            self.cluster,
            policies,
            self.clock,
            self.events,
            RotationMetrics(self.registry, nrc_names=self.nrc_metrics),
            on_pass=self.passes.append,
        )
        self.driver = VirtualDriver(self.controller, self.cluster, self.clock)
        return self.controller

    def node(self, age: timedelta, *, name: str | None = None, **kw: Any) -> str:
        """Add a Ready node with a workload, created ``age`` ago."""
        return self.cluster.add_node(
            "pool", name, created_at=self.clock.now() - age, workload=WORKLOAD, **kw
        )

    async def run(self, duration: timedelta) -> None:
        """Let the controller and the cluster run for ``duration`` of virtual time."""
        await self.driver.run_until(self.clock.now() + duration)

    async def pass_once(self) -> PassResult:
        """Exactly one pass over the pool, now."""
        self.controller.due.pop("pool", None)
        (result,) = await self.controller.run_due()
        return result

    def metric(self, name: str, **labels: str) -> float | None:
        """A sample's value from the controller's registry."""
        return self.registry.get_sample_value(name, {"nodepool": "pool", **labels})

    def pool_annotations(self) -> dict[str, str]:
        return dict(self.cluster.pools["pool"].annotations)

    def claim_annotations(self, name: str) -> dict[str, str]:
        return dict(self.cluster.claims[name].annotations)
