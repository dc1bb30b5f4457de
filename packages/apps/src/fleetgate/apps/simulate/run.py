"""One simulation: a fleet on the fake cluster, the real controller, virtual time, a result.

The fake cluster is asked for through the plugin manager (``cluster: fake``) like any backend;
the controller is the production ``RotationController`` with the production machine. The result
is a plain JSON-ready document (spec §9): header, events, generations, rotations, windows,
diagnostics. Identical inputs give an identical document.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import structlog
from prometheus_client import CollectorRegistry

from fleetgate.apps.container import virtual_container
from fleetgate.apps.controller.metrics import RotationMetrics
from fleetgate.apps.controller.shell import RotationController
from fleetgate.apps.settings import Settings
from fleetgate.apps.simulate.capacity import LedgerController, LedgerRun, allocatable
from fleetgate.apps.simulate.engine import DEFAULT_BUDGET, VirtualDriver
from fleetgate.apps.simulate.fleet import Fleet, FleetNode
from fleetgate.apps.simulate.lineage import build_lineage
from fleetgate.apps.simulate.recorder import Recorder
from fleetgate.apps.simulate.report import headline
from fleetgate.domain.durations import format_duration as fmt
from fleetgate.domain.ports import SimulatedCluster
from fleetgate.domain.rotation.annotations import KARPENTER_DO_NOT_DISRUPT, format_timestamp
from fleetgate.domain.rotation.budget_forecast import forecast_budgets
from fleetgate.domain.rotation.derive import Derivation
from fleetgate.domain.rotation.disruption import NODES
from fleetgate.domain.rotation.formulas import input_record
from fleetgate.domain.rotation.policy import ResolvedPolicy, RotationPolicy

WORKLOAD = {"cpu": 3_000}  # on a 4-CPU node: a surge can never squeeze onto a neighbour
Progress = Callable[[datetime], None]


class SimulationError(ValueError):
    """The inputs cannot be simulated; the message names the input and the reason."""


@dataclass(frozen=True)
class Inputs:
    """Everything a simulation depends on (and nothing else)."""

    policy: RotationPolicy
    fleet: Fleet
    start: datetime
    end: datetime
    env_provisioning: timedelta | None = None
    env_drain: timedelta | None = None
    budget: int = DEFAULT_BUDGET


def instant(value: datetime) -> str:
    """An instant as RFC3339 in UTC (``2024-01-03T02:00:00Z``)."""
    return format_timestamp(value)


def header(resolved: ResolvedPolicy, d: Derivation) -> dict[str, Any]:
    """The Env-independent derivation result with its inputs (spec §9 ``result``)."""
    return {
        "ageThreshold": fmt(d.age_threshold),
        "tRot": fmt(d.t_rot),
        "tRotEst": fmt(d.t_rot_est),
        "provisioningEstimate": fmt(d.provisioning_estimate),
        "drainEstimate": fmt(d.drain_estimate),
        "leadTime": fmt(d.lead_time),
        "guaranteedChances": d.guaranteed_chances,
        "throughputCapacity": d.capacity,
        "findings": [f.as_dict() for f in d.findings],
        "inputs": input_record(d.inputs, resolved.failure_pause, fmt, never="Never"),
    }


def simulate(inputs: Inputs, progress: Progress | None = None) -> dict[str, Any]:
    """Run the simulation to completion and return its document."""
    return asyncio.run(simulate_async(inputs, progress))


async def simulate_async(inp: Inputs, progress: Progress | None = None) -> dict[str, Any]:
    """:func:`simulate` inside a running event loop."""
    if inp.end <= inp.start:
        raise SimulationError("--to: must be after --from")
    fleet, policy = inp.fleet, inp.policy
    selector = policy.node_pool_selector
    if selector is None or not selector.matches(fleet.labels):
        raise SimulationError(
            f"policy {policy.name!r}: its nodePoolSelector does not select the fleet's pool "
            f"(labels {dict(fleet.labels)}); set fleet.labels to match it"
        )
    try:
        resolved = policy.resolve(fleet.tgp)
    except ValueError as exc:
        raise SimulationError(f"policy {policy.name!r}: {exc}") from exc
    derivation = resolved.derive(fleet.expire_after, len(fleet.nodes))
    provisioning = inp.env_provisioning or inp.fleet.env_provisioning
    drain = inp.env_drain or inp.fleet.env_drain
    provisioning = provisioning if provisioning is not None else derivation.provisioning_estimate
    drain = drain if drain is not None else derivation.drain_estimate
    diagnostics = _diagnostics(resolved, derivation, fleet, provisioning, drain)
    budgets = forecast_budgets(
        resolved, fleet.budgets, fleet.expire_after, len(fleet.nodes), inp.start, inp.end
    )
    diagnostics += [_diag(f.severity.value, f.code.value, f.message) for f in budgets.findings]

    container = virtual_container(Settings(cluster="fake", cluster_options={}), inp.start)
    clock, cluster = container.clock(), container.simulated_cluster()
    cluster.add_pool(
        fleet.pool,
        expire_after=fleet.expire_after,
        termination_grace_period=fleet.tgp,
        labels=dict(fleet.labels),
        provisioning_delay=provisioning,
        drain_time=drain,
        # spec.limits.nodes is kept in milli-units, as status.resources.nodes is counted.
        limits=None if fleet.node_limit is None else {NODES: 1000 * fleet.node_limit},
        replicas=fleet.replicas,
        ready=fleet.ready,
        budgets=fleet.budgets,
        **(
            {}
            if fleet.ledger is None
            else {"node_allocatable": allocatable(fleet.ledger.node_threads)}
        ),
    )
    ledger = None if fleet.ledger is None else LedgerRun(fleet.ledger, clock)
    if fleet.pod_budget is not None:
        # The workload Pod on each node carries {app: <pool>}: the budget guards all of them.
        cluster.add_pdb(
            "default",
            f"{fleet.pool}-workload",
            match_labels={"app": fleet.pool},
            min_available=fleet.pod_budget.min_available,
            max_unavailable=fleet.pod_budget.max_unavailable,
            unhealthy_policy=fleet.pod_budget.unhealthy_policy,
        )
    for node in fleet.nodes:
        extra: dict[str, Any] = {}
        if node.expire_after is not None:
            extra["expire_after"] = node.expire_after
        if node.tgp is not None:
            extra["termination_grace_period"] = node.tgp
        extra["workload"] = WORKLOAD
        if ledger is not None:  # sized as the fleet's ledger says
            extra.update(ledger.node_options(node.name))
        cluster.add_node(fleet.pool, node.name, created_at=node.created_at, **extra)
        _karpenter_state(cluster, fleet.pool, node, inp.start)

    recorder = Recorder(clock, cluster)

    async def policies() -> list[RotationPolicy]:
        return [policy]

    controller = (RotationController if ledger is None else LedgerController)(
        cluster,
        policies,
        clock,
        recorder,
        RotationMetrics(CollectorRegistry()),
        on_pass=recorder.on_pass,
        logger=_QUIET,
    )
    if ledger is not None:
        assert isinstance(controller, LedgerController)
        await ledger.start(cluster, controller, fleet.pool, clock)
    driver = VirtualDriver(controller, cluster, clock, budget=inp.budget, on_advance=progress)
    complete = await driver.run_until(inp.end)
    through = clock.now()
    if not complete:
        diagnostics.append(
            _diag(
                # fatal: the verdict of a run cut short cannot be trusted (exit status 1)
                "fatal",
                "StepBudgetExhausted",
                f"stopped after {driver.passes} controller passes at "
                f"{instant(through)}; the result is partial",
            )
        )
    lineage = build_lineage(cluster, fleet, recorder, resolved, through)
    windows = _windows(resolved, inp.start, through)
    drains = _drain_events(cluster)
    events = _window_events(windows) + recorder.events + lineage.breach_events + drains
    ledger_report = None if ledger is None else await ledger.finish()
    if ledger is not None:
        events += ledger.tally.events
    events.sort(key=lambda e: (e["at"], _ORDER.get(e["type"], 50)))
    summary = {
        "nodes": len(fleet.nodes),
        "rotations": len(lineage.rotations),
        "succeeded": sum(r["outcome"] == "success" for r in lineage.rotations),
        "failed": sum(r["outcome"] == "failure" for r in lineage.rotations),
        "surgeless": sum(r["mode"] == "surgeless" for r in lineage.rotations),
        "breaches": lineage.breaches,
        "breachedNodes": len(lineage.breached_slots),
        "forcedDrains": sum(e["type"] == "drain-forced" for e in drains),
        "controllerPasses": driver.passes,
    }
    if lineage.breaches:
        diagnostics.append(_diag("fatal", "ExpireAfterBreach", headline(summary)))
    if summary["forcedDrains"]:
        diagnostics.append(
            _diag(
                "warning",
                "DrainForcedAtTerminationGracePeriod",
                f"{summary['forcedDrains']} drain(s) were held by the PodDisruptionBudget until "
                "terminationGracePeriod and then forced: their Pods were deleted regardless of "
                "the budget. Allow a disruption (maxUnavailable >= 1) or keep a spare replica.",
            )
        )
    doc = {
        "result": header(resolved, derivation),
        "env": {"provisioning": fmt(provisioning), "drain": fmt(drain)},
        "summary": summary,
        "events": [_jsonable(e) for e in events],
        "generations": lineage.generations,
        "rotations": lineage.rotations,
        "windows": [_jsonable(w) for w in windows],
        "diagnostics": diagnostics,
        "partial": not complete,
        "simulatedFrom": instant(inp.start),
        "simulatedThrough": instant(through),
    }
    if ledger_report is not None:  # only when the fleet declares placements
        doc["ledger"] = ledger_report
        if ledger_report["strandedAtEnd"] or ledger_report["lost"]:
            diagnostics.append(
                _diag(
                    "fatal",
                    "PlacementsStranded",
                    f"{ledger_report['strandedAtEnd']} placement(s) stranded and "
                    f"{ledger_report['lost']} lost at the end of the run",
                )
            )
    if budgets.effective != budgets.windows:  # only when the budgets take something away
        doc["budgetWindows"] = {
            "effective": [_jsonable({"start": i.start, "end": i.end}) for i in budgets.effective],
            "unusable": [_jsonable({"start": i.start, "end": i.end}) for i in budgets.unusable],
        }
    return doc


def _karpenter_state(
    cluster: SimulatedCluster, pool: str, node: FleetNode, start: datetime
) -> None:
    """Put the node's Karpenter-side state from the fleet file on the cluster."""
    if node.drifted:
        cluster.set_drifted(node.name)
    if node.disrupted_at is not None:
        reason = "Drifted" if node.drifted else "Underutilized"
        cluster.disrupt_at(node.name, node.disrupted_at, reason)
    if node.do_not_disrupt is not None:
        # A Pod that requests nothing, so the opt-out changes no capacity; if the node goes,
        # it is rescheduled like any owned Pod and its opt-out goes with it.
        cluster.add_pod(
            "default",
            f"{node.name}-guarded",
            node=node.name,
            pool=pool,
            annotations={KARPENTER_DO_NOT_DISRUPT: node.do_not_disrupt},
            started_at=start,
        )


# The controller's log lines become the document's events; the run itself prints nothing.
_QUIET = structlog.wrap_logger(structlog.ReturnLogger(), processors=[])
_ORDER = {"window-close": 0, "window-open": 1, "expire-after-breach": 2}


def _diag(severity: str, code: str, message: str) -> dict[str, str]:
    return {"severity": severity, "code": code, "message": message}


def _diagnostics(
    resolved: ResolvedPolicy, d: Derivation, fleet: Fleet, provisioning: timedelta, drain: timedelta
) -> list[dict[str, str]]:
    out = []
    if provisioning > resolved.ready_timeout:
        out.append(
            _diag(
                "fatal",
                "EnvProvisioningAboveReadyTimeout",
                f"provisioning takes {fmt(provisioning)}, longer than readyTimeout "
                f"{fmt(resolved.ready_timeout)}: every surge times out and rolls back",
            )
        )
    caps = {n.tgp or fleet.tgp for n in fleet.nodes}
    tight = sorted((c for c in caps if c is not None and drain > c), reverse=True)
    if tight:
        out.append(
            _diag(
                "warn",
                "EnvDrainAboveTGP",
                f"drains take {fmt(drain)}, longer than terminationGracePeriod "
                f"{fmt(tight[-1])}: Karpenter cuts them at tGP",
            )
        )
    if d.fatal:
        codes = ", ".join(f.code.value for f in d.findings if f.fatal)
        out.append(
            _diag(
                "fatal",
                "FatalFinding",
                f"{codes}: no rotation will start; the "
                "clock runs on and nodes reach their forced expiry",
            )
        )
    return out


def _windows(resolved: ResolvedPolicy, start: datetime, end: datetime) -> list[dict[str, Any]]:
    schedule = resolved.schedule
    tick = timedelta(microseconds=1)
    out = []
    for iv in schedule.window_intervals(start, end):
        out.append(
            {
                "start": iv.start,
                "end": iv.end,
                "startClipped": iv.start == start and schedule.in_window(start - tick),
                "endClipped": iv.end == end and schedule.in_window(end),
            }
        )
    return out


def _drain_events(cluster: Any) -> list[dict[str, Any]]:
    """Karpenter's side of the drains: evictions a PodDisruptionBudget refused, forced ends."""
    kinds = {"eviction-blocked", "drain-forced"}
    return [
        {"at": r.at, "type": r.kind, "node": r.name, **dict(r.data)}
        for r in cluster.history
        if r.kind in kinds
    ]


def _window_events(windows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    events = []
    for w in windows:
        if not w["startClipped"]:
            events.append({"at": w["start"], "type": "window-open"})
        if not w["endClipped"]:
            events.append({"at": w["end"], "type": "window-close"})
    return events


def _jsonable(item: dict[str, Any]) -> dict[str, Any]:
    return {k: instant(v) if isinstance(v, datetime) else v for k, v in item.items()}
