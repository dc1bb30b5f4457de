"""The census carried across passes decides exactly what a census built afresh decides.

Every pass of a random simulation (fleet, policy, windows, faults, controller restarts) is
stepped twice over the same observation: by the controller with the ``PoolCensus`` it carried
from its last pass, and by the pure machine given none (so it starts one that classifies every
claim of this observation). Both are the machine's one path; what differs is only how much of
the census was kept. The two Steps (actions, requeue, report with census and reason, quiet
instant) must be equal at every pass; a restart starts a new controller with an empty census.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime, timedelta

import structlog
from hypothesis import HealthCheck, given, settings
from prometheus_client import CollectorRegistry

from fleetgate.adapters import plugins
from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.fakecluster.cluster import FakeCluster
from fleetgate.apps.controller.metrics import RotationMetrics
from fleetgate.apps.controller.shell import RotationController
from fleetgate.apps.simulate.engine import VirtualDriver
from fleetgate.apps.simulate.fleet import load_fleet
from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.cluster import PoolObservation
from fleetgate.domain.rotation.machine import Step, step
from fleetgate.domain.rotation.policy import RotationPolicy
from tests.apps.controller.world import WORKLOAD, ListSink, policy
from tests.strategies import SIM_START, sim_faults, sim_fleets, sim_varied_policies

_QUIET = structlog.wrap_logger(structlog.ReturnLogger(), processors=[])


class Checked(RotationController):
    """A controller that also steps every pass with a new census and insists both agree."""

    checked = 0

    def step(
        self, pool: str, obs: PoolObservation, policies: Sequence[RotationPolicy], now: datetime
    ) -> Step:
        fast = super().step(pool, obs, policies, now)
        slow = step(obs, policies, now, self.config)
        assert fast == slow, f"pass at {now}: the carried census disagrees with a new one"
        Checked.checked += 1
        return fast


def _controller(cluster: FakeCluster, clock: VirtualClock, pol: RotationPolicy) -> Checked:
    async def policies() -> list[RotationPolicy]:
        return [pol]

    return Checked(
        cluster, policies, clock, ListSink(), RotationMetrics(CollectorRegistry()), logger=_QUIET
    )


def _fault(cluster: FakeCluster, kind: str, index: int) -> None:
    claims = sorted(cluster.claims)
    name = claims[index % len(claims)] if claims else None
    if kind == "fail-provisioning":
        cluster.fail_provisioning("pool")
    elif kind == "provisioning-heals":
        cluster.fail_provisioning("pool", on=False)
    elif kind == "capacity-shortage":
        cluster.capacity_shortage("pool")
    elif kind == "capacity-returns":
        cluster.capacity_shortage("pool", on=False)
    elif kind == "stick-drain" and name is not None:
        cluster.stick_drain(name)
    elif kind == "preempt-placeholders":
        cluster.preempt_placeholders("pool")
    elif kind in ("not-ready", "ready-again") and name is not None:
        if cluster.claims[name].node is not None:
            cluster.set_ready(name, kind == "ready-again")
    elif kind == "karpenter-disrupts" and name is not None:
        if cluster.claims[name].deleting_at is None:
            cluster.karpenter_disrupt(name)
    elif kind in ("drifts", "drift-resolved") and name is not None:
        cluster.set_drifted(name, kind == "drifts")
    elif kind == "pod-opt-out" and name is not None:
        node = cluster.claims[name].node
        if node is not None:  # a guarded Pod for two hours: it runs out by time alone
            value = {ann.KARPENTER_DO_NOT_DISRUPT: "2h"}
            cluster.add_pod("app", f"guarded-{name}-{index}", node=node.name, annotations=value)
    elif kind in ("opt-out", "opt-in") and name is not None:
        node = cluster.claims[name].node
        if node is not None:
            value = ann.TRUE if kind == "opt-out" else None
            node.annotations.pop(ann.KARPENTER_DO_NOT_DISRUPT, None)
            if value is not None:
                node.annotations[ann.KARPENTER_DO_NOT_DISRUPT] = value
            node.touch()


async def _simulate(
    pol: RotationPolicy, document: dict[str, object], faults: list[tuple[timedelta, str, int]]
) -> int:
    fleet = load_fleet(document, SIM_START)
    clock = VirtualClock(SIM_START)
    cluster: FakeCluster = plugins.make_cluster(
        plugins.plugin_manager(allow={"fake"}), "fake", {}, clock
    )
    cluster.add_pool(
        "pool",
        expire_after=fleet.expire_after,
        termination_grace_period=fleet.tgp,
        provisioning_delay=timedelta(minutes=3),
        drain_time=timedelta(minutes=8),
    )
    for node in fleet.nodes:
        cluster.add_node("pool", node.name, created_at=node.created_at, workload=WORKLOAD)
    driver = VirtualDriver(_controller(cluster, clock, pol), cluster, clock)
    for offset, kind, index in [*faults, (timedelta(days=21), "end", 0)]:
        await driver.run_until(SIM_START + offset)
        if kind == "crash":  # a restarted controller: nothing carried over but the cluster
            driver.controller = _controller(cluster, clock, pol)
        else:
            _fault(cluster, kind, index)
    return driver.passes


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sim_varied_policies(), sim_fleets(), sim_faults())
def test_the_carried_census_decides_what_a_fresh_pass_decides(
    pol: RotationPolicy, document: dict[str, object], faults: list[tuple[timedelta, str, int]]
) -> None:
    before = Checked.checked
    passes = asyncio.run(_simulate(pol, document, faults))
    assert Checked.checked - before == passes > 0


def test_a_carried_census_reclassifies_only_what_changed_or_fell_due() -> None:
    """Over an unchanged pool the carried census classifies nothing again; time alone brings
    back only the claims whose age threshold it reaches."""
    from fleetgate.domain.rotation.census import PoolCensus
    from fleetgate.domain.rotation.cluster import NodeClaimView

    pol = policy()
    resolved = pol.resolve(None)
    threshold = timedelta(days=14) - resolved.lead_time_for(None)
    # Ages from 18 h past the age threshold to 60 h short of it, 6 h apart.
    claims = tuple(
        NodeClaimView(
            f"c{k + 3:02d}",
            SIM_START - threshold + k * timedelta(hours=6),
            timedelta(days=14),
            ready=True,
        )
        for k in range(-3, 11)
    )
    obs = PoolObservation("pool", "1", timedelta(days=14), claims=claims)
    rules, lead = resolved.selection, resolved.lead_time_base
    carried = PoolCensus().advanced(obs, rules, lead, SIM_START)
    first = carried.headcount.eligible
    assert carried.reclassified == 14 and first == 3
    carried = carried.advanced(obs, rules, lead, SIM_START)
    assert carried.reclassified == 14
    later = SIM_START + timedelta(days=1)
    carried = carried.advanced(obs, rules, lead, later)
    fresh = step(obs, [pol], later).report.census
    assert carried.headcount == fresh and fresh.eligible == 7
    # Exactly the claims that crossed their age threshold were classified again.
    assert carried.reclassified == 14 + fresh.eligible - first
