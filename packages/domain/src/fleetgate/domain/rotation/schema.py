"""The one statement of a RotationPolicy manifest's shape: every field, its type, default, bound,
pattern, enum and whether it is required, as an OpenAPI v3 structural schema.

Everything else follows from it: the chart's CRDs are generated from it (the Karpenter adapter's
``crd`` module; a test holds the committed files to what it generates), the domain's reader
(:mod:`~fleetgate.domain.rotation.manifest`) takes its field names from it and its defaults from
the same values, and the API's published schema is held to it field by field
(tests/deploy/test_crd_fields.py, tests/apps/api/schemas/test_policy.py).

It is assembled from the definitions it states, never retyped: the bounded texts and numbers of
:mod:`~fleetgate.domain.rotation.fields`, the defaults of the policy's own values
(:class:`~fleetgate.domain.rotation.policy.Surge`, :class:`RotationPolicy`), the day names and
clock patterns of :mod:`~fleetgate.domain.rotation.windows` and the selector operators of
:mod:`~fleetgate.domain.rotation.labelselector`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from functools import cache
from typing import Any

from fleetgate.domain.durations import format_duration
from fleetgate.domain.rotation.fields import (
    AGE_THRESHOLD,
    AUTO,
    MAX_ROTATION_CHANCES,
    MAX_UNAVAILABLE,
    MIN_ROTATION_CHANCES,
    SURGE_DURATIONS,
)
from fleetgate.domain.rotation.labelselector import OPERATORS
from fleetgate.domain.rotation.policy import RotationPolicy, Surge
from fleetgate.domain.rotation.windows import DAY_NAMES, END_PATTERN, START_PATTERN

__all__ = [
    "METADATA_FIELDS",
    "POLICY_SCHEMA",
    "SPEC_SCHEMA",
    "TOP_FIELDS",
    "properties",
]

Schema = dict[str, Any]

#: The Kubernetes object metadata a manifest may carry (only ``name`` is kept).
METADATA_FIELDS = (
    "name",
    "generateName",
    "namespace",
    "labels",
    "annotations",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "finalizers",
    "ownerReferences",
    "managedFields",
    "selfLink",
)
#: The top of a manifest: what the API server keeps at the root, and the two parts it types.
TOP_FIELDS = ("apiVersion", "kind", "metadata", "spec", "status")

_STRING: Schema = {"type": "string"}
_STRINGS: Schema = {"type": "array", "items": _STRING}


def _toggle(description: str | None = None, *, default: bool = False) -> Schema:
    """``{enabled: bool}``, itself defaulted to ``{}`` (so ``enabled`` gets its default)."""
    node: Schema = {} if description is None else {"description": description}
    node |= {
        "type": "object",
        "default": {},
        "properties": {"enabled": {"type": "boolean", "default": default}},
    }
    return node


def _duration(name: str, default: timedelta | None) -> Schema:
    node: Schema = {"type": "string"}
    if default is not None:
        node["default"] = format_duration(default)
    node["pattern"] = SURGE_DURATIONS[name]
    return node


def _spec() -> Schema:
    surge, policy = Surge(), RotationPolicy()
    durations = {
        "readyTimeout": surge.ready_timeout,
        "cooldownAfter": surge.cooldown_after,
        "failurePause": surge.failure_pause,
        "retryBackoff": surge.retry_backoff,
        "drainEstimate": surge.drain_estimate,
        "provisioningEstimate": surge.provisioning_estimate,
    }
    return {
        "type": "object",
        "required": ["nodePoolSelector", "maintenanceWindows"],
        "properties": {
            "nodePoolSelector": {
                "description": "Label selector over NodePool labels; {} selects every NodePool.",
                "type": "object",
                "properties": {
                    "matchLabels": {"type": "object", "additionalProperties": _STRING},
                    "matchExpressions": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["key", "operator"],
                            "properties": {
                                "key": _STRING,
                                "operator": {"type": "string", "enum": list(OPERATORS)},
                                "values": _STRINGS,
                            },
                        },
                    },
                },
            },
            "ageThreshold": {
                "description": f'"{AUTO}" (derived from the windows) or a duration such as 240h '
                "or 10d.",
                "type": "string",
                "default": AUTO,
                "pattern": AGE_THRESHOLD,
            },
            "minRotationChances": {
                "type": "integer",
                "format": "int32",
                "minimum": MIN_ROTATION_CHANCES,
                "maximum": MAX_ROTATION_CHANCES,
                "default": policy.min_rotation_chances,
            },
            "maintenanceWindows": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["timezone", "days", "start", "end"],
                    "properties": {
                        "timezone": {"type": "string", "minLength": 1},
                        "days": {
                            "type": "array",
                            "minItems": 1,
                            "items": {"type": "string", "enum": list(DAY_NAMES)},
                        },
                        "start": {"type": "string", "pattern": START_PATTERN},
                        "end": {"type": "string", "pattern": END_PATTERN},
                    },
                },
            },
            "exclusions": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["start", "end"],
                    "properties": {"start": _STRING, "end": _STRING},
                },
            },
            "surge": {
                "description": "How one make-before-break rotation runs (see docs/rotation.md).",
                "type": "object",
                "default": {},
                "properties": {
                    "maxUnavailable": {
                        "description": "Rotation is serial per NodePool, so this is always 1.",
                        "type": "integer",
                        "minimum": MAX_UNAVAILABLE,
                        "maximum": MAX_UNAVAILABLE,
                        "default": surge.max_unavailable,
                    },
                    **{name: _duration(name, value) for name, value in durations.items()},
                    "matchNodeRequirements": {
                        "type": "object",
                        "properties": {"required": _STRINGS, "preferred": _STRINGS},
                    },
                    "forcefulFallback": _toggle(default=surge.forceful_fallback.enabled),
                },
            },
            "prePull": {
                **_toggle("Reserved; must stay disabled.", default=policy.pre_pull.enabled),
                "x-kubernetes-validations": [
                    {
                        "rule": "!has(self.enabled) || !self.enabled",
                        "message": "prePull is reserved and must stay disabled (enabled false)",
                    }
                ],
            },
            "rotateDrifted": _toggle(
                "Rotate NodeClaims Karpenter marked Drifted (off by default).",
                default=policy.rotate_drifted,
            ),
            "ignoreDisruptionBudgets": _toggle(
                "Start rotations even while the NodePool's disruption budgets allow none (off by "
                "default).",
                default=policy.ignore_disruption_budgets,
            ),
        },
    }


#: ``spec``'s schema.
SPEC_SCHEMA: Mapping[str, Any] = _spec()
#: The whole manifest's (the ``openAPIV3Schema`` of the CRDs): the observed ``status`` is kept as
#: the controller writes it.
POLICY_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "required": ["spec"],
    "properties": {
        "spec": SPEC_SCHEMA,
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
}


@cache
def properties(path: str) -> frozenset[str]:
    """The field names of the object at ``path`` ("spec", "spec.surge", ...; a list's items by
    its own path, "spec.maintenanceWindows")."""
    node: Mapping[str, Any] = POLICY_SCHEMA
    for part in path.split("."):
        node = node["properties"][part]
        if node.get("type") == "array":
            node = node["items"]
    return frozenset(node["properties"])
