"""The rotation side at scale: the simulator over months, and one controller tick over a big pool.

Both run the production code on the fake cluster (``cluster: fake``) in virtual time: the
simulator is ``fleetgate simulate``'s own function, the tick is ``RotationController.reconcile``
over one pool, observation to applied actions.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from prometheus_client import CollectorRegistry

from benchmarks.report import Table, Verdict, ms
from benchmarks.sizes import Sizes
from benchmarks.stats import percentile
from fleetgate.adapters import plugins
from fleetgate.adapters.clock import VirtualClock
from fleetgate.apps.controller.metrics import RotationMetrics
from fleetgate.apps.controller.shell import RotationController
from fleetgate.apps.simulate.fleet import load_fleet
from fleetgate.apps.simulate.run import Inputs, simulate_async
from fleetgate.domain.rotation.labelselector import LabelSelector
from fleetgate.domain.rotation.policy import RotationPolicy, Surge
from fleetgate.domain.rotation.windows import MaintenanceWindow

START = datetime(2024, 1, 1, tzinfo=UTC)
LABELS = {"fleetgate.io/rotate": "true"}
WEEK = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def policy() -> RotationPolicy:
    """Nightly eight-hour windows, fast surges: enough throughput for a thousand-node pool."""
    return RotationPolicy(
        name="bench",
        node_pool_selector=LabelSelector(match_labels=dict(LABELS)),
        maintenance_windows=(MaintenanceWindow("UTC", WEEK, "20:00", "04:00"),),
        surge=Surge(ready_timeout=timedelta(minutes=15), cooldown_after=timedelta(minutes=1)),
    )


def fleet_document(nodes: int) -> dict[str, Any]:
    """A generated fleet: 14-day expiry, ages spread over 12 days, 2 m provisioning, 3 m drain."""
    return {
        "fleet": {
            "pool": "workers",
            "labels": dict(LABELS),
            "expireAfter": "14d",
            "terminationGracePeriod": "1h",
            "generate": {"count": nodes, "spread": "12d"},
        },
        "env": {"provisioning": "2m", "drain": "3m"},
    }


class _OutOfTime(Exception):
    """The simulator ran past the benchmark's wall-clock cap."""


async def simulator(sizes: Sizes) -> tuple[Table, Verdict]:
    """``sizes.simulator_nodes`` nodes for ``sizes.simulator_days`` days of virtual time.

    A run longer than ``sizes.simulator_seconds`` is stopped and reported with how far it got,
    and the wall time the whole span would take at that pace.
    """
    end = START + timedelta(days=sizes.simulator_days)
    inputs = Inputs(policy(), load_fleet(fleet_document(sizes.simulator_nodes), START), START, end)
    reached = [START]
    began = time.perf_counter()

    def progress(instant: datetime) -> None:
        reached[0] = instant
        if time.perf_counter() - began > sizes.simulator_seconds:
            raise _OutOfTime

    t = Table(
        "Simulator: the real controller on the fake cluster, in virtual time",
        ["nodes", "days", "rotations", "breaches", "controller passes", "ms per pass", "wall s"],
    )
    try:
        doc = await simulate_async(inputs, progress)
    except _OutOfTime:
        seconds = time.perf_counter() - began
        days = (reached[0] - START) / timedelta(days=1)
        whole = seconds * sizes.simulator_days / days if days > 0 else float("inf")
        t.add(
            f"{sizes.simulator_nodes:,}",
            f"{days:.1f} of {sizes.simulator_days} (stopped at {sizes.simulator_seconds:.0f} s)",
            "-",
            "-",
            "-",
            "-",
            f"{seconds:.1f} (whole span at this pace: ~{whole:,.0f})",
        )
        verdict = Verdict(
            f"simulator < 3 s ({sizes.simulator_nodes:,} nodes, {sizes.simulator_days} days)",
            f"~{whole:,.0f} s (extrapolated from {days:.1f} days in {seconds:.0f} s)",
            False,
        )
        return t, verdict
    seconds = time.perf_counter() - began
    s = doc["summary"]
    t.add(
        f"{sizes.simulator_nodes:,}",
        sizes.simulator_days,
        f"{s['rotations']:,}",
        s["breaches"],
        f"{s['controllerPasses']:,}",
        f"{1000 * seconds / max(s['controllerPasses'], 1):.2f}",
        f"{seconds:.2f}",
    )
    verdict = Verdict(
        f"simulator < 3 s ({sizes.simulator_nodes:,} nodes, {sizes.simulator_days} days)",
        f"{seconds:.2f} s",
        seconds < 3.0 and not doc["partial"],
    )
    return t, verdict


class _Discard:
    async def emit(self, events: Any) -> None:
        """Drop the events (a tick's cost is the controller's, not a sink's)."""
        del events


async def tick(sizes: Sizes) -> tuple[Table, Verdict]:
    """One controller pass over a pool of ``sizes.tick_claims`` NodeClaims, repeated."""
    clock = VirtualClock(START)
    cluster = plugins.make_cluster(plugins.plugin_manager(allow={"fake"}), "fake", {}, clock)
    cluster.add_pool(
        "workers",
        expire_after="14d",
        termination_grace_period="1h",
        labels=dict(LABELS),
        provisioning_delay="2m",
        drain_time="3m",
    )
    spread = timedelta(days=12) / sizes.tick_claims
    for i in range(sizes.tick_claims):
        cluster.add_node("workers", None, created_at=START - spread * i, workload={"cpu": 3000})
    bench_policy = policy()

    async def policies() -> list[RotationPolicy]:
        return [bench_policy]

    controller = RotationController(
        cluster,
        policies,
        clock,
        _Discard(),
        RotationMetrics(CollectorRegistry()),
        logger=structlog.wrap_logger(structlog.ReturnLogger(), processors=[]),
    )
    await controller.startup_sweep()
    # Time the gateway's share apart from the rest. The fake cluster observes like an informer
    # cache: it rebuilds only the objects that changed since the last observation (and hands
    # out the same value when nothing did), so this is the incremental cost, not a full copy.
    observed: list[float] = []
    observe = cluster.observe

    async def timed_observe(pool: str) -> Any:
        began = time.perf_counter()
        try:
            return await observe(pool)
        finally:
            observed.append(time.perf_counter() - began)

    cluster.observe = timed_observe
    samples = []
    for _ in range(sizes.ticks + 1):
        began = time.perf_counter()
        await controller.reconcile("workers")
        samples.append(time.perf_counter() - began)
        clock.advance(timedelta(seconds=30))
        cluster.catch_up()
    first, rest = samples[0], samples[1:]
    p50 = percentile(rest, 0.5)
    t = Table(
        "Controller tick: observe the pool, step the machine, apply (fake cluster)",
        [
            "NodeClaims",
            "ticks",
            "first tick ms",
            "p50 ms",
            "worst ms",
            "of which observe, incremental (p50 ms)",
        ],
    )
    t.add(
        f"{sizes.tick_claims:,}",
        len(rest),
        ms(first),
        ms(p50),
        ms(max(rest)),
        ms(percentile(observed[1:], 0.5)),
    )
    verdict = Verdict(
        f"controller tick < 50 ms ({sizes.tick_claims:,} NodeClaims)",
        f"p50 {ms(p50)} ms",
        p50 < 0.05,
    )
    return t, verdict
