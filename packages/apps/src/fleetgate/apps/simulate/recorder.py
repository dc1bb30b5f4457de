"""What the simulator writes down while the real controller runs: rotations and reasons.

The recorder listens to every controller pass (``RotationController.on_pass``) and to the events
the controller emits; it never looks inside the machine. Gate and census reasons are coalesced:
one event per change of reason, as an operator reading the log would see them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fleetgate.apps.controller.shell import PassResult
from fleetgate.domain.events import Event
from fleetgate.domain.rotation import actions as act
from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.findings import POOL_STATE_CODES
from fleetgate.domain.rotation.gates import NO_ELIGIBLE_CLAIM

_POOL_STATE = frozenset(code.value for code in POOL_STATE_CODES)


@dataclass
class Rotation:
    """One rotation attempt as the simulator saw it."""

    node: str
    mode: str
    start: datetime
    deadline: datetime | None = None
    surge_node: str | None = None
    ready: datetime | None = None
    done: datetime | None = None
    outcome: str | None = None
    drain_stuck: bool = False  # the controller reported its drain outliving the bound


@dataclass
class Recorder:
    """Collects events and rotations; ``clock`` gives each its instant."""

    clock: Any
    cluster: Any
    events: list[dict[str, Any]] = field(default_factory=list)
    rotations: list[Rotation] = field(default_factory=list)
    _reason: tuple[str, ...] | None = None
    _open: dict[str, Rotation] = field(default_factory=dict)

    def add(self, at: datetime, kind: str, **data: Any) -> None:
        """Record one event."""
        self.events.append({"at": at, "type": kind, **data})

    async def emit(self, events: Sequence[Event]) -> None:
        """EventSink: keep the controller's estimate warnings and pool-state findings (the rest
        is derived elsewhere)."""
        for ev in events:
            if ev.kind == "EstimateDisagreesWithObservation":
                self.add(ev.at, "estimate-disagrees", message=ev.data.get("message", ""))
            elif ev.kind in _POOL_STATE:  # the NodePool's own state: why no surge can work
                self.add(ev.at, "pool-finding", code=ev.kind, message=ev.data.get("message", ""))

    def on_pass(self, result: PassResult) -> None:
        """Read one pass: starts, surge readiness, completions, and why nothing started."""
        step = result.step
        if step is None:
            return
        now = self.clock.now()
        applied = result.applied
        if step.started and any(isinstance(a, act.AnnotatePool) for a in applied):
            surgeless = any(isinstance(a, act.CountForcefulFallback) for a in applied)
            claim = self.cluster.archive.get(step.started)
            deadline = (
                claim.created_at + claim.expire_after
                if claim is not None and claim.expire_after is not None
                else None
            )
            rotation = Rotation(step.started, "surgeless" if surgeless else "surge", now, deadline)
            self.rotations.append(rotation)
            self._open[step.started] = rotation
            self._reason = None
            rule = {"rule": step.drift_rule.value} if step.drift_rule is not None else {}
            self.add(now, "rotation-start", node=step.started, surgeless=surgeless, **rule)
        anchor = step.report.anchor
        current = self._open.get(anchor or "")
        if current is not None:
            if step.report.drain_stuck and not current.drain_stuck:
                current.drain_stuck = True  # as fleetgate_rotation_drain_stuck turns 1
                self.add(now, "drain-stuck", node=current.node)
            self._progress(current, applied, now)
        reason = step.report.reason
        if reason is None or step.report.governance.status.value != "governed":
            return
        key: tuple[str, ...]
        if reason == NO_ELIGIBLE_CLAIM and step.report.census is not None:
            census = step.report.census.as_dict()
            key = (reason, *(f"{k}={v}" for k, v in census.items()))
            if key != self._reason:
                self.add(now, "no-eligible-claim", census=census)
        elif step.report.blocked is not None:
            key = (reason,)
            if key != self._reason:
                until = step.report.blocked.until
                self.add(now, "blocked-by-gate", gate=reason, until=until)
        else:
            key = (reason,)
            if key != self._reason:
                self.add(now, "not-starting", reason=reason)
        self._reason = key

    def _progress(self, rotation: Rotation, applied: Sequence[act.Action], now: datetime) -> None:
        for a in applied:
            if isinstance(a, act.ObserveDuration) and a.phase == "surge_wait":
                claim = self.cluster.archive.get(rotation.node)
                rotation.surge_node = claim.annotations.get(ann.SURGE_CLAIM) if claim else None
                rotation.ready = now
                self.add(now, "node-ready", node=rotation.node, surgeNode=rotation.surge_node)
            elif isinstance(a, act.CountCompletion):
                rotation.outcome = a.outcome
                rotation.done = now
                self._open.pop(rotation.node, None)
                kind = {"success": "rotation-done", "failure": "rotation-failed"}.get(
                    a.outcome, "rotation-expired"
                )
                self.add(now, kind, node=rotation.node)
