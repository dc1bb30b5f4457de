"""The rotation side at scale: the simulator over months, and one controller tick over a big pool.

Both run the production code on the fake cluster (``cluster: fake``) in virtual time: the
simulator is ``fleetgate simulate``'s own function, the tick is ``RotationController.reconcile``
over one pool, observation to applied actions.
"""

from __future__ import annotations

import asyncio
import gc
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from prometheus_client import CollectorRegistry

from benchmarks import simulator_cli
from benchmarks.report import Table, Verdict, ms
from benchmarks.sizes import Sizes
from benchmarks.stats import percentile
from fleetgate.adapters import plugins
from fleetgate.adapters.clock import VirtualClock
from fleetgate.apps.container import Container
from fleetgate.apps.controller.metrics import RotationMetrics
from fleetgate.apps.controller.shell import RotationController
from fleetgate.apps.services.simulation import SimulationInputs, SimulationResult
from fleetgate.apps.simulate.fleet import load_fleet
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


LINEAR_TOLERANCE = 1.25
"""The largest fleet's cost per node-day against the smallest's that still reads as linear
(run-to-run noise on this machine is about a tenth)."""
SIMULATOR_TARGET = 3.0
"""Seconds for 1,000 nodes over 90 days through the CLI with JSON output (issue 44)."""


@dataclass(frozen=True)
class _Run:
    """One simulation as the benchmark saw it."""

    nodes: int
    days: float
    """Simulated days reached (the whole span unless stopped at the cap)."""
    span: int
    seconds: float
    cpu: float
    doc: dict[str, Any] | None
    """The result document's summary (None when stopped at the cap); the rest is dropped, so
    a later run's garbage collections do not walk an earlier run's events."""

    @property
    def whole(self) -> float:
        """Wall seconds the whole span takes (extrapolated when stopped)."""
        if self.doc is not None:
            return self.seconds
        return self.seconds * self.span / self.days if self.days > 0 else float("inf")

    @property
    def whole_cpu(self) -> float:
        """CPU seconds the whole span takes (extrapolated when stopped)."""
        if self.doc is not None:
            return self.cpu
        return self.cpu * self.span / self.days if self.days > 0 else float("inf")

    @property
    def passes(self) -> int | None:
        """Controller passes (None when stopped)."""
        return None if self.doc is None else int(self.doc["controllerPasses"])


async def _simulate(nodes: int, days: int, cap: float) -> _Run:
    gc.collect()  # each run starts from the heap the last one left, not with its garbage
    end = START + timedelta(days=days)
    inputs = SimulationInputs(policy(), load_fleet(fleet_document(nodes), START), START, end)
    simulator = Container().simulator()
    reached = [START]
    began, cpu = time.perf_counter(), time.process_time()

    def progress(instant: datetime) -> None:
        reached[0] = instant
        if time.perf_counter() - began > cap:
            raise _OutOfTime

    try:
        result: SimulationResult | None = await simulator.run_async(inputs, progress)
    except _OutOfTime:
        result = None
    seconds, cpu = time.perf_counter() - began, time.process_time() - cpu
    reached_days = days if result is not None else (reached[0] - START) / timedelta(days=1)
    summary = None if result is None else dict(result.summary.as_dict())
    return _Run(nodes, reached_days, days, seconds, cpu, summary)


async def simulator(sizes: Sizes) -> tuple[list[Table], list[Verdict]]:
    """The simulator over months through the CLI (``simulator_nodes`` x ``simulator_days``,
    and the large fleet), and its cost against fleet size in this process. A CLI run longer
    than ``sizes.simulator_seconds`` is stopped and reported so; a scaling run so stopped is
    reported with how far it got and the wall time the whole span would take."""
    cap = sizes.simulator_seconds
    # The targets are through the CLI: a fresh process a run, JSON output and all.
    main = await asyncio.to_thread(
        simulator_cli.run_cli,
        sizes.simulator_nodes,
        sizes.simulator_days,
        cap,
        fleet_document(sizes.simulator_nodes),
    )
    large = await asyncio.to_thread(
        simulator_cli.run_cli,
        sizes.simulator_large_nodes,
        sizes.simulator_large_days,
        cap,
        fleet_document(sizes.simulator_large_nodes),
    )
    t = simulator_cli.table([main, large], cap)
    verdicts = simulator_cli.verdicts(main, large, SIMULATOR_TARGET)
    # The cost against fleet size is measured in this process (no start-up in it): the first
    # simulation of a process also imports the backend plugins, paid by a one-day run of ten
    # nodes and reported apart.
    warm = await _simulate(10, 1, cap)
    scaling = Table(
        f"Simulator cost against fleet size ({sizes.simulator_scaling_days} simulated days each)",
        [
            "nodes",
            "controller passes",
            "CPU s",
            "wall s",
            "CPU ms per pass",
            "CPU µs per node-day",
            "vs smallest",
        ],
    )
    base: float | None = None
    per_node_day = 0.0
    for nodes in sizes.simulator_scaling:
        run = await _simulate(nodes, sizes.simulator_scaling_days, cap)
        # The cost is CPU time: on a shared machine wall time also counts waits for a core.
        per_node_day = 1e6 * run.whole_cpu / (nodes * sizes.simulator_scaling_days)
        base = per_node_day if base is None else base
        passes = run.passes
        extrapolated = "" if run.doc is not None else " (extrapolated)"
        scaling.add(
            f"{nodes:,}",
            f"{passes:,}" if passes is not None else "- (stopped)",
            f"{run.whole_cpu:.2f}{extrapolated}",
            f"{run.whole:.2f}{extrapolated}",
            f"{1000 * run.cpu / passes:.2f}" if passes else "-",
            f"{per_node_day:,.0f}",
            f"{per_node_day / base:.2f}x",
        )
    scaling.notes.append(
        f"Measured in the benchmark's process; its first simulation (ten nodes, one day) took "
        f"{warm.seconds:.2f} s, imports included, and is left out."
    )
    scaling.notes.append(
        "Passes grow with the fleet (each rotation takes a fixed number), so linear growth is a "
        "constant cost per node-day; the last column is that cost against the smallest fleet's."
    )
    if base is not None and len(sizes.simulator_scaling) > 1:
        largest = sizes.simulator_scaling[-1]
        growth = per_node_day / base
        verdicts.append(
            Verdict(
                f"simulator cost grows no worse than linearly ({sizes.simulator_scaling[0]:,} to "
                f"{largest:,} nodes: cost per node-day at most {LINEAR_TOLERANCE:.2f}x)",
                f"{growth:.2f}x",
                growth <= LINEAR_TOLERANCE,
            )
        )
    return [t, scaling], verdicts


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
