"""What the dashboard of ``fleetgate up`` shows, gathered into one JSON-ready snapshot.

The ledger answers for nodes, claims, the cluster row and the audit trail; the fake cluster for
what each node is doing (cordoned, draining, serving as a surge node); the controller's own
report of its last pass over each pool for the derived A/G/C, the findings, the gate or census
("why is nothing rotating?") and the rotation in flight. Rotations are remembered from the
controller's passes: started when a pass starts one, ended when a pass counts its completion.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from fleetgate.apps.controller.shell import PassResult
from fleetgate.domain.capacity.claims import Claim
from fleetgate.domain.capacity.dimensions import Resources
from fleetgate.domain.capacity.model import NodeState, Placement, RecordedEvent
from fleetgate.domain.capacity.reconcile import PassReport
from fleetgate.domain.durations import format_duration
from fleetgate.domain.nodesync import CORDONED
from fleetgate.domain.ports import CapacityLedger, Clock
from fleetgate.domain.rotation import actions as act
from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.cluster import PoolObservation
from fleetgate.domain.rotation.ledger_gate import ledger_hold
from fleetgate.domain.rotation.machine import PoolReport

ROTATIONS_KEPT = 40
EVENTS_KEPT = 40
ROTATION_EVENTS_KEPT = 15
"""Rotation events (the controller's, naming a ``nodepool``) are kept apart from the capacity
events: placement churn writes several events a real second and would push a rotation event off
"Recent events" before anyone saw it. The list shows the latest of both, merged by id."""
HIDDEN_EVENTS = frozenset(
    {
        "schedule final candidates",
        "schedule candidate refused by capacity guard",
        "reschedule candidate refused by capacity guard",
    }
)
"""Per-candidate audit events, too frequent to be worth a line on the dashboard: the walk's
outcome (placed, waived, failed, redirected) is shown instead. All are in ``/v1/events``."""
HOLD_REAL_SECONDS = 20.0
"""How long, in real seconds, a finished rotation stays on its pool card: at the default speed
a whole rotation lasts under a second of real time, less than one refresh of the page."""
TIMELINE_MIN = timedelta(hours=24)
TIMELINE_MAX = timedelta(days=8)


def iso(value: datetime | None) -> str | None:
    """An instant as ISO 8601 (None stays None)."""
    return None if value is None else value.isoformat()


@dataclass
class Rotation:
    """One rotation as the dashboard draws it."""

    pool: str
    claim: str
    start: datetime
    end: datetime | None = None
    outcome: str | None = None
    forceful: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The wire form."""
        return {
            "claim": self.claim,
            "start": iso(self.start),
            "end": iso(self.end),
            "outcome": self.outcome,
            "forceful": self.forceful,
        }


class UpStatus:
    """Remembers what the controller and the reconciler reported; builds the snapshot."""

    def __init__(
        self,
        ledger: CapacityLedger,
        cluster: Any,
        clock: Clock,
        *,
        speed: float,
        target_load: float,
        counters: Any = None,
    ) -> None:
        self.ledger = ledger
        self.cluster = cluster
        self.clock = clock
        self.speed = speed
        self.target_load = target_load
        self.counters = counters
        self.started = clock.now()
        self.reports: dict[str, PoolReport] = {}
        self.rotations: dict[str, deque[Rotation]] = {}
        self.reconciled: dict[str, Any] | None = None
        self.events: deque[dict[str, Any]] = deque(maxlen=EVENTS_KEPT)
        self.rotation_events: deque[dict[str, Any]] = deque(maxlen=ROTATION_EVENTS_KEPT)
        self._after = 0

    # --- feeds -------------------------------------------------------------------------------

    def on_pass(self, result: PassResult, now: datetime) -> None:
        """Record a controller pass: its report, and any rotation it started or ended."""
        if result.step is None:
            self.reports.pop(result.pool, None)
            return
        self.reports[result.pool] = result.step.report
        log = self.rotations.setdefault(result.pool, deque(maxlen=ROTATIONS_KEPT))
        if result.step.started is not None:
            log.append(Rotation(result.pool, result.step.started, now))
        for action in result.applied:
            current = log[-1] if log and log[-1].end is None else None
            if isinstance(action, act.CountForcefulFallback) and current is not None:
                current.forceful = True
            elif isinstance(action, act.CountCompletion) and current is not None:
                current.end, current.outcome = now, action.outcome

    def on_reconcile(self, report: PassReport, now: datetime) -> None:
        """Record the last reconcile pass."""
        s = report.summary
        self.reconciled = {
            "at": iso(now),
            "nodes": s.nodes,
            "drifted_nodes": s.drifted_nodes,
            "claims_expired": s.claims_expired,
            "duration_ms": round(s.duration_seconds * 1000, 1),
            "clean": s.clean,
        }

    # --- the snapshot ------------------------------------------------------------------------

    async def snapshot(self) -> dict[str, Any]:
        """Everything the dashboard shows, JSON-ready."""
        now = self.clock.now()
        nodes = await self.ledger.nodes()
        placements = await self.ledger.placements()
        observations = await self._observations()
        cluster = await self.ledger.cluster()
        claims = await self.ledger.claims()
        await self._read_events()
        return {
            "now": iso(now),
            "clock": "virtual",  # up's accelerated clock: the page labels every instant so
            "started": iso(self.started),
            "elapsed": _rounded(now - self.started),
            "speed": self.speed,
            "target_load": self.target_load,
            "cluster": {
                "total": cluster.total.as_dict(),
                "claimed": cluster.claimed.as_dict(),
                "unclaimed_used": cluster.unclaimed_used.as_dict(),
            },
            "nodes": [self._node(n, placements, observations, now) for n in nodes],
            "claims": [self._claim(c, now) for c in claims],
            "namespaces": _namespaces(placements, claims, now),
            "pools": [self._pool(name, obs, now) for name, obs in sorted(observations.items())],
            "events": self._recent_events(),
            "reconciler": self.reconciled,
            "workload": self.counters() if callable(self.counters) else None,
            "placements": len(placements),
        }

    async def _observations(self) -> dict[str, PoolObservation]:
        found = {}
        for pool in await self.cluster.list_pools():
            obs = await self.cluster.observe(pool)
            if obs is not None:
                found[pool] = obs
        return found

    async def _read_events(self) -> None:
        batch: list[RecordedEvent] = await self.ledger.events(after_id=self._after, limit=1000)
        for recorded in batch:
            self._after = max(self._after, recorded.id)
            if recorded.event.kind in HIDDEN_EVENTS:
                continue
            kept = self.rotation_events if "nodepool" in recorded.event.data else self.events
            kept.append(recorded.as_dict())

    def _recent_events(self) -> list[dict[str, Any]]:
        """Newest first: the latest capacity events and the latest rotation events, merged."""
        merged = [*self.events, *self.rotation_events]
        return sorted(merged, key=lambda ev: ev["id"], reverse=True)

    def _node(
        self,
        node: NodeState,
        placements: list[Placement],
        pools: dict[str, PoolObservation],
        now: datetime,
    ) -> dict[str, Any]:
        obs = pools.get(node.pool)
        cs = node.metrics.cpu_schedulable
        load = node.metrics.cpu_load_1
        return {
            "name": node.name,
            "pool": node.pool,
            "schedulable": node.schedulable,
            "cordoned_by": None
            if node.schedulable
            else ("cluster" if node.labels.get(CORDONED) == "true" else "operator"),
            "role": _role(node.name, obs),
            "placements": sum(1 for p in placements if p.node == node.name),
            "limits": node.limits.as_dict(),
            "used": node.used.as_dict(),
            "expected_demand": round(node.expected_demand, 2),
            "load": load,
            "cpu_schedulable": cs,
            "demand": round((load or 0.0) + node.expected_demand, 2),
            "budget": None if cs is None else round(self.target_load * cs, 2),
            "lifetime": self._lifetime(node.name, obs, now),
        }

    def _lifetime(
        self, node: str, obs: PoolObservation | None, now: datetime
    ) -> dict[str, Any] | None:
        """The node's age against its pool's A, and when Karpenter would expire it by force."""
        claim = None if obs is None else next((c for c in obs.claims if c.node_name == node), None)
        if obs is None or claim is None:
            return None
        report = self.reports.get(obs.name)
        d = report.derivation if report is not None else None
        expire_after = claim.expire_after or obs.expire_after
        age = max(now - claim.created_at, timedelta(0))
        return {
            "age": _rounded(age),
            "age_seconds": age.total_seconds(),
            "A": None if d is None else format_duration(d.age_threshold),
            "A_seconds": None if d is None else d.age_threshold.total_seconds(),
            "expires_at": None if expire_after is None else iso(claim.created_at + expire_after),
        }

    @staticmethod
    def _claim(claim: Claim, now: datetime) -> dict[str, Any]:
        return {
            "id": claim.id,
            "namespace": claim.namespace,
            "state": "active" if claim.is_active(now) else "expired",
            "limit": claim.limit.as_dict(),
            "used": claim.used.as_dict(),
            "expires_at": iso(claim.expires_at),
            "expires_in": _rounded(max(claim.expires_at - now, timedelta(0))),
        }

    def _pool(self, name: str, obs: PoolObservation, now: datetime) -> dict[str, Any]:
        report = self.reports.get(name)
        out: dict[str, Any] = {
            "name": name,
            "nodes": len(obs.nodes),
            "labels": dict(obs.labels),
            "governance": None,
            "policy": None,
            "window_open": None,
            "reason": None,
            "derivation": None,
            "gate": None,
            "census": None,
            "active": _active(obs),
            "recent": self._recent(name, now),
            "timeline": None,
        }
        if report is None:
            return out
        gov = report.governance
        out["governance"] = {"status": gov.status.value, "detail": gov.detail}
        out["policy"] = gov.winner or None
        out["window_open"] = report.window_active
        out["reason"] = report.reason
        if report.blocked is not None:
            out["gate"] = {
                "reason": report.blocked.reason.value,
                "until": iso(report.blocked.until),
            }
        held = ledger_hold(report.ledger_hold)
        if held is not None:  # at the start (the gate above), or a drain waiting for room
            out["gate"] = {**(out["gate"] or {"reason": "ledgerCapacity", "until": None})}
            out["gate"]["ledger"] = held
        if report.census is not None:
            out["census"] = report.census.as_dict()
        d = report.derivation
        if d is not None:
            out["derivation"] = {
                "A": format_duration(d.age_threshold),
                "G": d.guaranteed_chances,
                "C": d.capacity,
                "P": format_duration(d.inputs.period),
                "t_rot": format_duration(d.t_rot),
                "t_rot_est": format_duration(d.t_rot_est),
                "findings": [f.as_dict() for f in d.findings] + _active_findings(report),
            }
        if gov.resolved is not None:
            out["timeline"] = self._timeline(name, gov.resolved.schedule, d, now)
        return out

    def _recent(self, pool: str, now: datetime) -> dict[str, Any] | None:
        """The pool's last finished rotation while it is recent enough to be seen: ended within
        ``HOLD_REAL_SECONDS`` of real time (that many times ``speed`` of virtual time)."""
        log = self.rotations.get(pool)
        last = next((r for r in reversed(log or ()) if r.end is not None), None)
        if last is None or last.end is None:
            return None
        if now - last.end > timedelta(seconds=HOLD_REAL_SECONDS * self.speed):
            return None
        return {**last.as_dict(), "ago": _rounded(now - last.end)}

    def _timeline(self, pool: str, schedule: Any, d: Any, now: datetime) -> dict[str, Any]:
        period = d.inputs.period if d is not None else TIMELINE_MIN
        span = min(max(2 * period, TIMELINE_MIN), TIMELINE_MAX)
        start, end = now - span * 3 / 4, now + span / 4
        windows = [
            {"start": iso(iv.start), "end": iso(iv.end)}
            for iv in schedule.window_intervals(start, end)
        ]
        rotations = [
            r.as_dict() for r in self.rotations.get(pool, ()) if r.end is None or r.end > start
        ]
        return {
            "start": iso(start),
            "end": iso(end),
            "zone": _zone(schedule),
            "windows": windows,
            "rotations": rotations,
        }


def _zone(schedule: Any) -> str:
    """The time zone the pool's windows are written in (the first window's; UTC if none)."""
    rules = getattr(schedule, "rules", ())
    return str(rules[0].zone.key) if rules else "UTC"


def _namespaces(
    placements: list[Placement], claims: list[Claim], now: datetime
) -> list[dict[str, Any]]:
    """What every namespace uses, claimed or not: placements and their resources summed."""
    used: dict[str, Resources] = {}
    count: dict[str, int] = {}
    for p in placements:
        used[p.namespace] = used.get(p.namespace, Resources()).plus(p.resources)
        count[p.namespace] = count.get(p.namespace, 0) + 1
    claimed = {c.namespace for c in claims if c.is_active(now)}
    return [
        {
            "namespace": ns,
            "placements": count.get(ns, 0),
            "used": used.get(ns, Resources()).as_dict(),
            "claimed": ns in claimed,
        }
        for ns in sorted(set(used) | claimed)
    ]


def _rounded(span: timedelta) -> str:
    """A span to the minute (virtual time runs too fast for seconds to mean anything)."""
    return format_duration(timedelta(minutes=int(span.total_seconds() // 60)))


def _role(node: str, obs: PoolObservation | None) -> str:
    """What the cluster is doing with the node: draining, cordoned, surge, or serving."""
    if obs is None:
        return "gone"
    claim = next((c for c in obs.claims if c.node_name == node), None)
    view = obs.node(node)
    if claim is None or view is None:
        return "gone"
    if claim.deleting:
        return "draining"
    serving = view.annotations.get(ann.SURGE_FOR)
    if serving == claim.name:
        return "rotating"  # frozen and cordoned while its replacement comes up
    if view.unschedulable:
        return "cordoned"
    if serving:
        return "surge"  # the replacement of the node being rotated
    return "ready" if view.ready else "launching"


def _active(obs: PoolObservation) -> dict[str, Any] | None:
    """The anchored rotation as the pool's annotations tell it."""
    anchor = obs.annotations.get(ann.ACTIVE_ROTATION)
    if not anchor:
        return None
    claim = obs.claim(anchor)
    state = claim.annotations.get(ann.CLAIM_STATE, "") if claim is not None else "gone"
    surge = claim.annotations.get(ann.SURGE_CLAIM) if claim is not None else None
    return {
        "claim": anchor,
        "state": state or "pending",
        "surge": surge,
        "started_at": claim.annotations.get(ann.STARTED_AT) if claim is not None else None,
        "mode": obs.annotations.get(ann.ROTATION_MODE) or "surge",
    }


def _active_findings(report: PoolReport) -> list[dict[str, Any]]:
    """What this pass warns about beyond the derivation: the Warning events it keeps raising."""
    out = [
        {"severity": "warning", "code": "EstimateDisagreesWithObservation", "message": c.message()}
        for c in report.estimates
        if c.disagrees
    ]
    if report.short_lead:
        names = ", ".join(sorted(report.short_lead))
        out.append(
            {"severity": "warning", "code": "ShortLead",
             "message": f"expireAfter is within the lead time; rotated best-effort: {names}"}
        )  # fmt: skip
    if report.drain_stuck:
        out.append(
            {"severity": "warning", "code": "DrainStuck",
             "message": "the drain outlived terminationGracePeriod plus the buffer"}
        )  # fmt: skip
    return out
