"""What node-rotation-controller (NRC, github.com/AkashiSN/node-rotation-controller) does where a
migration from it depends on it: its Kubernetes Events and its Prometheus series (test support).

Written from NRC's source, read at its main branch (38b39b5); each table names the file it comes
from. Its RotationPolicy schema is the fixture ``tests/fixtures/nrc/``. The tests hold fleetgate
to these facts, never to fleetgate's own copy of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fleetgate.adapters.karpenter.events import event_body
from fleetgate.domain.events import Event
from fleetgate.domain.rotation.findings import FindingCode

FIXTURES = Path(__file__).parent / "fixtures" / "nrc"


@dataclass(frozen=True)
class EventShape:
    """One Event reason as NRC records it (``events.EventRecorder.Eventf``): the kind of the
    object it regards, its type, its action, and the kind of its related object (None: unset)."""

    regarding: str
    type: str
    action: str
    related: str | None = None


#: NRC's Event per reason: internal/controller/rotation_controller.go (RotationStarted,
#: RotationCompleted, RotationFailed, ForcefulFallback, the three SurgeClamp*, GovernanceLost),
#: transitions.go (SurgeUnschedulable; the action names RotateNode, ProvisionSurge) and
#: warnings.go (ShortLead, PolicyConflict, the schedule findings; the other action names).
EVENTS: dict[str, EventShape] = {
    "RotationStarted": EventShape("NodePool", "Normal", "RotateNode", related="NodeClaim"),
    "RotationCompleted": EventShape("NodePool", "Normal", "RotateNode"),
    "RotationFailed": EventShape("NodeClaim", "Warning", "RotateNode", related="NodePool"),
    "ForcefulFallback": EventShape("NodePool", "Warning", "RotateSurgeless"),
    "SurgeUnschedulable": EventShape("NodeClaim", "Warning", "ProvisionSurge"),
    "SurgeClamped": EventShape("NodeClaim", "Normal", "ProvisionSurge", related="NodePool"),
    "SurgeClampRefused": EventShape("NodeClaim", "Warning", "ProvisionSurge", related="NodePool"),
    "SurgeClampBandExceeded": EventShape(
        "NodeClaim", "Warning", "ProvisionSurge", related="NodePool"
    ),
    "GovernanceLost": EventShape("NodePool", "Warning", "ReapRotation"),
    "PolicyConflict": EventShape("NodePool", "Warning", "ResolvePolicy"),
    "ShortLead": EventShape("NodeClaim", "Warning", "CheckExpiry"),
}

#: A non-fatal schedule finding (reason: its code) is reported on the NodePool (warnings.go).
FINDING = EventShape("NodePool", "Warning", "EvaluateSchedule")


@dataclass(frozen=True)
class Series:
    """One NRC metric family: its Prometheus type and its labels."""

    type: str
    labels: tuple[str, ...] = ("nodepool",)


#: NRC's series (internal/metrics/metrics.go): every one carries ``nodepool``; the histogram's
#: buckets are 30 s doubling ten times. Names as exposed (a counter's family name + ``_total``).
SERIES: dict[str, Series] = {
    "noderotation_completed_total": Series("counter", ("nodepool", "outcome")),
    "noderotation_forceful_fallback_total": Series("counter"),
    "noderotation_duration_seconds": Series("histogram", ("nodepool", "phase")),
    "noderotation_candidates": Series("gauge"),
    "noderotation_in_progress": Series("gauge"),
    "noderotation_freeze_until_timestamp": Series("gauge"),
    "noderotation_age_threshold_seconds": Series("gauge"),
    "noderotation_rotation_chances": Series("gauge"),
    "noderotation_window_period_seconds": Series("gauge"),
    "noderotation_short_lead_nodes": Series("gauge"),
    "noderotation_drain_stuck": Series("gauge"),
    "noderotation_retry_count": Series("gauge"),
    "noderotation_policy_conflict": Series("gauge"),
    "noderotation_window_active": Series("gauge"),
    "noderotation_throughput_capacity": Series("gauge"),
    "noderotation_t_rot_estimate_seconds": Series("gauge"),
    "noderotation_t_rot_bound_seconds": Series("gauge"),
}

#: Label values NRC writes (metrics.go, recorder.go): completion outcomes and duration phases.
OUTCOMES = ("success", "failure", "expired")
PHASES = ("surge_wait", "drain")
BUCKETS = tuple(30.0 * 2**i for i in range(10))

#: NRC's PrometheusRule (charts/node-rotation-controller/templates/prometheusrule.yaml): each
#: alert and the series its expression reads.
ALERTS: dict[str, tuple[str, ...]] = {
    "NodeRotationCompletedFailureOrExpired": ("noderotation_completed_total",),
    "NodeRotationCandidatesNotDraining": ("noderotation_candidates",),
    "NodeRotationStalledInWindow": (
        "noderotation_window_active",
        "noderotation_candidates",
        "noderotation_completed_total",
    ),
    "NodeRotationDrainStuck": ("noderotation_drain_stuck",),
    "NodeRotationShortLeadNodes": ("noderotation_short_lead_nodes",),
    "NodeRotationRetryCountHigh": ("noderotation_retry_count",),
    "NodeRotationForcefulFallback": ("noderotation_forceful_fallback_total",),
}


def assert_recorded_as_nrc_does(event: Event) -> None:
    """The Kubernetes Event fleetgate writes for ``event`` regards, types, names its action and
    relates as NRC's Event of that reason does (fleetgate's own warnings as NRC's findings)."""
    body = event_body(event, instance="fleetgate-0", serial=0, uid=None)
    if body is None:
        return  # not about a cluster object: no Kubernetes Event at all
    shape = EVENTS.get(event.kind)
    if shape is None:
        assert event.kind in {*FindingCode, *FLEETGATE_WARNINGS}, f"{event.kind}: no NRC shape"
        shape = FINDING
    related = body.get("related")
    got = EventShape(
        body["regarding"]["kind"], body["type"], body["action"], related and related["kind"]
    )
    assert got == shape, f"{event.kind}: {got} where NRC records {shape}"
    if shape.related == "NodePool":  # the pool the claim belongs to
        assert related["name"] == event.data["nodepool"]


#: fleetgate's own warnings on a NodePool, reported like NRC's schedule findings.
FLEETGATE_WARNINGS = frozenset({"EstimateDisagreesWithObservation"})
