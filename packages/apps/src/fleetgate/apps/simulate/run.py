"""The pieces of one simulation run: the fleet put on the fake cluster, and the diagnostics,
windows and events read back from it.

The use case that runs them (the real controller against the fake cluster in virtual time, the
typed result) is :mod:`fleetgate.apps.services.simulation`; the world it runs in (the fake
cluster through the plugin manager, the production ``RotationController``) is built by the
composition root.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import structlog

from fleetgate.apps.ledgerfile import allocatable
from fleetgate.apps.simulate.capacity import LedgerRun
from fleetgate.apps.simulate.fleet import Fleet, FleetNode
from fleetgate.domain.durations import format_duration as fmt
from fleetgate.domain.ports import SimulatedCluster
from fleetgate.domain.rotation.annotations import KARPENTER_DO_NOT_DISRUPT, format_timestamp
from fleetgate.domain.rotation.derive import Derivation
from fleetgate.domain.rotation.disruption import NODES
from fleetgate.domain.rotation.formulas import input_record
from fleetgate.domain.rotation.policy import ResolvedPolicy

WORKLOAD = {"cpu": 3_000}  # on a 4-CPU node: a surge can never squeeze onto a neighbour


@dataclass(frozen=True)
class Diagnostic:
    """Something the simulation found about the inputs or the run (spec §9 ``diagnostics``)."""

    severity: str
    code: str
    message: str

    @property
    def fatal(self) -> bool:
        """Whether it makes the simulation's verdict a failure."""
        return self.severity == "fatal"

    def as_dict(self) -> dict[str, str]:
        """The JSON object of the document's ``diagnostics``."""
        return {"severity": self.severity, "code": self.code, "message": self.message}


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


def put_fleet(
    cluster: SimulatedCluster,
    fleet: Fleet,
    start: datetime,
    provisioning: timedelta,
    drain: timedelta,
    ledger: LedgerRun | None = None,
) -> None:
    """Put the fleet's pool, its PodDisruptionBudget and its nodes on the fake cluster (sized
    as the fleet's ledger says, when it declares one)."""
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
        **({} if ledger is None else {"node_allocatable": allocatable(ledger.spec.node_threads)}),
    )
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
        if ledger is not None:
            extra.update(ledger.node_options(node.name))
        cluster.add_node(fleet.pool, node.name, created_at=node.created_at, **extra)
        _karpenter_state(cluster, fleet.pool, node, start)


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
# Bound once: the lazy proxy ``wrap_logger`` returns would bind anew for every line.
QUIET = structlog.wrap_logger(structlog.ReturnLogger(), processors=[]).bind()
_ORDER = {"window-close": 0, "window-open": 1, "expire-after-breach": 2}


def environment_diagnostics(
    resolved: ResolvedPolicy, d: Derivation, fleet: Fleet, provisioning: timedelta, drain: timedelta
) -> list[Diagnostic]:
    """What the inputs say before the run: an environment the policy cannot meet, a fatal
    finding that stops every rotation."""
    out = []
    if provisioning > resolved.ready_timeout:
        out.append(
            Diagnostic(
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
            Diagnostic(
                "warn",
                "EnvDrainAboveTGP",
                f"drains take {fmt(drain)}, longer than terminationGracePeriod "
                f"{fmt(tight[-1])}: Karpenter cuts them at tGP",
            )
        )
    if d.fatal:
        codes = ", ".join(f.code.value for f in d.findings if f.fatal)
        out.append(
            Diagnostic(
                "fatal",
                "FatalFinding",
                f"{codes}: no rotation will start; the "
                "clock runs on and nodes reach their forced expiry",
            )
        )
    return out


def windows(resolved: ResolvedPolicy, start: datetime, end: datetime) -> list[dict[str, Any]]:
    """The windows between ``start`` and ``end``, each with whether the span clips it."""
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


def drain_events(cluster: Any) -> list[dict[str, Any]]:
    """Karpenter's side of the drains: evictions a PodDisruptionBudget refused, forced ends."""
    kinds = {"eviction-blocked", "drain-forced"}
    return [
        {"at": r.at, "type": r.kind, "node": r.name, **dict(r.data)}
        for r in cluster.history
        if r.kind in kinds
    ]


def events(spans: list[dict[str, Any]], *others: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The windows' openings and closings with the other events, in the document's order."""
    out = []
    for w in spans:
        if not w["startClipped"]:
            out.append({"at": w["start"], "type": "window-open"})
        if not w["endClipped"]:
            out.append({"at": w["end"], "type": "window-close"})
    for other in others:
        out += other
    out.sort(key=lambda e: (e["at"], _ORDER.get(e["type"], 50)))
    return [jsonable(e) for e in out]


def jsonable(item: dict[str, Any]) -> dict[str, Any]:
    """``item`` with its instants as RFC3339 text."""
    return {k: instant(v) if isinstance(v, datetime) else v for k, v in item.items()}
