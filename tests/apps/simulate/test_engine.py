"""The virtual-time driver folds away only passes at which nothing can have changed.

Every run here is made twice on identical clusters: folding (as ``fleetgate simulate`` runs) and
with ``verify=True``, which runs every pass a fold would skip and records any that wrote. The
folded run must write exactly what the verifying run writes, at the same instants, with fewer
passes; a controller restarted in the middle of a folded span (nothing carried over but the
cluster) must reach the same decisions.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

import structlog
from hypothesis import HealthCheck, given, settings
from prometheus_client import CollectorRegistry

from fleetgate.adapters import plugins
from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.fakecluster.cluster import FakeCluster
from fleetgate.apps.controller.metrics import RotationMetrics
from fleetgate.apps.controller.shell import PassResult, RotationController
from fleetgate.apps.simulate.engine import VirtualDriver
from fleetgate.apps.simulate.fleet import load_fleet
from fleetgate.domain.rotation.actions import WRITES
from fleetgate.domain.rotation.policy import RotationPolicy
from tests.apps.controller.test_incremental import _fault
from tests.apps.controller.world import WORKLOAD, ListSink, policy
from tests.strategies import SIM_START, sim_faults, sim_fleets, sim_varied_policies

_QUIET = structlog.wrap_logger(structlog.ReturnLogger(), processors=[])
_END = timedelta(days=21)


@dataclass
class Run:
    """What one driven simulation wrote, pass by pass, and how many passes it took."""

    writes: list[tuple[datetime, tuple[object, ...]]] = field(default_factory=list)
    idle_anchored: int = 0
    """Passes that found a rotation in flight and wrote nothing."""
    passes: int = 0
    violations: list[str] = field(default_factory=list)


def _cluster(document: dict[str, object], clock: VirtualClock) -> FakeCluster:
    fleet = load_fleet(document, SIM_START)
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
    return cluster


def _controller(
    cluster: FakeCluster, clock: VirtualClock, pol: RotationPolicy, run: Run
) -> RotationController:
    async def policies() -> list[RotationPolicy]:
        return [pol]

    def on_pass(result: PassResult) -> None:
        written = tuple(a for a in result.applied if isinstance(a, WRITES))
        if written:
            run.writes.append((clock.now(), written))
        elif result.step is not None and result.step.report.anchor is not None:
            run.idle_anchored += 1

    return RotationController(
        cluster,
        policies,
        clock,
        ListSink(),
        RotationMetrics(CollectorRegistry()),
        on_pass=on_pass,
        logger=_QUIET,
    )


async def _drive(
    pol: RotationPolicy,
    document: dict[str, object],
    faults: list[tuple[timedelta, str, int]],
    *,
    verify: bool,
    end: timedelta = _END,
) -> Run:
    clock = VirtualClock(SIM_START)
    cluster = _cluster(document, clock)
    run = Run()
    driver = VirtualDriver(_controller(cluster, clock, pol, run), cluster, clock, verify=verify)
    for offset, kind, index in [*faults, (end, "end", 0)]:
        await driver.run_until(SIM_START + offset)
        if kind == "crash":  # a restarted controller: nothing carried over but the cluster
            driver.controller = _controller(cluster, clock, pol, run)
        elif kind != "end":
            _fault(cluster, kind, index)
            driver.changed()  # a watch would wake the pool on the fault's change
    run.passes, run.violations = driver.passes, driver.violations
    return run


def _both(
    pol: RotationPolicy,
    document: dict[str, object],
    faults: list[tuple[timedelta, str, int]],
    end: timedelta = _END,
) -> tuple[Run, Run]:
    folded = asyncio.run(_drive(pol, document, faults, verify=False, end=end))
    checked = asyncio.run(_drive(pol, document, faults, verify=True, end=end))
    return folded, checked


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sim_varied_policies(), sim_fleets(), sim_faults())
def test_folding_skips_only_passes_that_write_nothing(
    pol: RotationPolicy, document: dict[str, object], faults: list[tuple[timedelta, str, int]]
) -> None:
    folded, checked = _both(pol, document, faults)
    assert checked.violations == []
    assert folded.writes == checked.writes
    assert folded.passes <= checked.passes


_POLICY = replace(policy(cooldown_after=timedelta(minutes=5)), age_threshold=timedelta(days=10))


def _fleet(count: int) -> dict[str, object]:
    # Twelve days into a 14-day expiry, an hour apart: past ``_POLICY``'s age threshold.
    created = [SIM_START - timedelta(days=12, hours=i) for i in range(count)]
    nodes = [{"name": f"n{i}", "createdAt": c.isoformat()} for i, c in enumerate(created)]
    return {"fleet": {"expireAfter": "14d", "nodes": nodes}}


def test_a_surge_rotation_takes_four_passes_without_the_look_again_ones() -> None:
    """With 3 m provisioning and an 8 m drain, a surge rotation has four instants at which
    something changes: the start, the surge claim appearing (persisted), the surge node Ready
    (the old claim's drain starts) and the drain's end. The two passes a real controller makes
    30 s after the second and the third find nothing to do; the fold skips exactly those."""
    pol = _POLICY
    folded, checked = _both(pol, _fleet(3), [], timedelta(hours=2))
    assert checked.violations == [] and folded.writes == checked.writes
    rotations = sum(1 for _, w in folded.writes if "CreatePlaceholder" in _kinds(w))
    assert rotations == 3
    assert len(folded.writes) == 4 * rotations  # every instant at which something changed
    assert folded.idle_anchored == 0  # and no look at a rotation in flight beside them
    assert checked.idle_anchored >= 2 * rotations


def test_a_restart_inside_a_folded_span_decides_the_same() -> None:
    """A controller restarted while the rotation waits for its surge node (a span the fold
    skipped) starts from the cluster alone and writes what the uninterrupted run writes."""
    pol = _POLICY
    document = _fleet(3)
    plain, _ = _both(pol, document, [], timedelta(hours=2))
    first = plain.writes[0][0]
    crash = first + timedelta(minutes=2)  # after the surge claim, before the node is Ready
    assert not any(first < at <= crash for at, _ in plain.writes[2:])
    restarted, checked = _both(pol, document, [(crash - SIM_START, "crash", 0)], timedelta(hours=2))
    assert checked.violations == []
    assert restarted.writes == plain.writes == checked.writes


def _kinds(written: tuple[object, ...]) -> list[str]:
    return [type(a).__name__ for a in written]


def test_a_readytimeout_reached_by_time_alone_still_gets_its_pass() -> None:
    """A surge that never becomes Ready changes nothing in the cluster: only time ends it. The
    folded run still looks at the pool when readyTimeout has passed and rolls back then."""
    folded, checked = _both(
        _POLICY, _fleet(1), [(timedelta(0), "fail-provisioning", 0)], timedelta(hours=2)
    )
    assert checked.violations == []
    assert folded.writes == checked.writes
    failed = [at for at, w in folded.writes if "DeletePlaceholder" in _kinds(w)]
    started = folded.writes[0][0]
    assert failed and started + _POLICY.surge.ready_timeout < failed[0]
    assert failed[0] <= started + _POLICY.surge.ready_timeout + timedelta(seconds=30)
