"""What one machine step asks the shell to do: cluster writes and reports, as values, in order.

The shell applies the actions of a step one after the other. A cluster write that fails
(conflict, object gone) stops the step there: the rest is not applied and the pool is requeued,
so a report placed after a write (a completion, a duration) is made at most once per transition,
and one placed before it at least once, as the spec asks (§7.3).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fleetgate.domain.rotation.cluster import PlaceholderSpec

Patch = Mapping[str, str | None]
"""An annotation merge patch: a None value deletes the key."""


# --- cluster writes ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AnnotatePool:
    """Merge-patch the pool's annotations; ``expect_version`` makes it the conditional anchor."""

    pool: str
    patch: Patch
    expect_version: str | None = None


@dataclass(frozen=True)
class AnnotateClaim:
    """Merge-patch a NodeClaim's annotations."""

    name: str
    patch: Patch


@dataclass(frozen=True)
class AnnotateNode:
    """Merge-patch a Node's annotations (freeze / cordon markers)."""

    name: str
    patch: Patch


@dataclass(frozen=True)
class SetUnschedulable:
    """Cordon (True) or uncordon (False) a Node."""

    node: str
    unschedulable: bool


@dataclass(frozen=True)
class CreatePlaceholder:
    """Create the surge placeholder Pod."""

    spec: PlaceholderSpec


@dataclass(frozen=True)
class DeletePlaceholder:
    """Delete a placeholder Pod (gone already is fine)."""

    namespace: str
    name: str


@dataclass(frozen=True)
class DeleteClaim:
    """Delete a NodeClaim: Karpenter drains it through the voluntary path."""

    name: str


# --- reports (metrics, events, logs) -------------------------------------------------------


@dataclass(frozen=True)
class CountCompletion:
    """``completed_total{outcome}`` + 1 for the pool; outcome is success, failure or expired."""

    outcome: str


@dataclass(frozen=True)
class CountForcefulFallback:
    """``forceful_fallback_total`` + 1 for the pool."""


@dataclass(frozen=True)
class ObserveDuration:
    """An observed phase duration: ``surge_wait`` (provisioning) or ``drain``."""

    phase: str
    seconds: float


# Event actions, named as node-rotation-controller names them (its internal/controller
# transitions.go and warnings.go): the verb the controller was performing when it reported.
ROTATE_NODE = "RotateNode"
ROTATE_SURGELESS = "RotateSurgeless"
PROVISION_SURGE = "ProvisionSurge"
EVALUATE_SCHEDULE = "EvaluateSchedule"
CHECK_EXPIRY = "CheckExpiry"
RESOLVE_POLICY = "ResolvePolicy"
REAP_ROTATION = "ReapRotation"


@dataclass(frozen=True)
class Announce:
    """A Kubernetes-style Event. ``dedup`` (when set) lets the shell send it once per key.

    ``action`` and ``related`` (kind, name) are the Event's ``action`` and ``related`` object,
    given per reason as node-rotation-controller gives them, so tooling written against its
    Events (``kubectl get events --field-selector``, alert routing on ``action``) keeps matching.
    """

    reason: str
    message: str
    subject: str
    subject_kind: str = "NodePool"
    warning: bool = False
    dedup: str | None = None
    action: str = field(kw_only=True)
    related: tuple[str, str] | None = field(default=None, kw_only=True)


@dataclass(frozen=True)
class Log:
    """A structured log line. ``dedup`` (when set) is logged only when it changes for the pool."""

    message: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    dedup: str | None = None


Action = (
    AnnotatePool
    | AnnotateClaim
    | AnnotateNode
    | SetUnschedulable
    | CreatePlaceholder
    | DeletePlaceholder
    | DeleteClaim
    | CountCompletion
    | CountForcefulFallback
    | ObserveDuration
    | Announce
    | Log
)

WRITES = (
    AnnotatePool,
    AnnotateClaim,
    AnnotateNode,
    SetUnschedulable,
    CreatePlaceholder,
    DeletePlaceholder,
    DeleteClaim,
)
"""The action types that change the cluster."""
