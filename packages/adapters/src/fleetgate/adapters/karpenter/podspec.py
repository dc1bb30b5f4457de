"""The placeholder Pod as Kubernetes JSON (spec §7.5), from the domain's ``PlaceholderSpec``.

The domain decides *what* the placeholder asks for (its name, its clamped requests, the pool and
matched requirement keys, the hosts to avoid, the taints to tolerate, its markers); this module
only spells that as a ``core/v1`` Pod:

* a bare Pod (no controller: nothing recreates it behind the controller's back);
* ``priorityClassName`` = the chart's negative PriorityClass and ``preemptionPolicy: Never``, so
  it never displaces real work and real work always displaces it;
* ``automountServiceAccountToken: false``: a pause container needs no API access;
* one ``pause`` container requesting exactly the footprint (requests only, no limits);
* required node affinity: every ``required`` requirement in ONE term (terms are OR-ed, the
  expressions of a term AND-ed), so the surge lands in the same pool, zone, arch, capacity type;
* preferred: weight 100 ``kubernetes.io/hostname NotIn`` the hosts to avoid (soft, because
  Karpenter refuses to provision for a required hostname anti-affinity), then weight 1 per
  ``preferred`` requirement;
* one ``Equal`` toleration per pool template taint.
"""

from __future__ import annotations

from typing import Any

from fleetgate.adapters.karpenter.quantity import format_quantity
from fleetgate.domain.rotation.cluster import PlaceholderSpec, Requirement

HOSTNAME_LABEL = "kubernetes.io/hostname"
DEFAULT_IMAGE = "registry.k8s.io/pause:3.10"
DEFAULT_PRIORITY_CLASS = "fleetgate-placeholder"
MANAGED_BY = "app.kubernetes.io/managed-by"


def _expression(req: Requirement) -> dict[str, Any]:
    expr: dict[str, Any] = {"key": req.key, "operator": req.operator}
    if req.operator not in ("Exists", "DoesNotExist"):
        expr["values"] = list(req.values)
    return expr


def placeholder_pod(
    spec: PlaceholderSpec,
    *,
    default_image: str = DEFAULT_IMAGE,
    default_priority_class: str = DEFAULT_PRIORITY_CLASS,
) -> dict[str, Any]:
    """The Pod manifest for ``spec``; the defaults fill an empty image or priority class."""
    preferred: list[dict[str, Any]] = []
    if spec.avoid_hosts:
        preferred.append(
            {
                "weight": 100,
                "preference": {
                    "matchExpressions": [
                        {
                            "key": HOSTNAME_LABEL,
                            "operator": "NotIn",
                            "values": list(spec.avoid_hosts),
                        }
                    ]
                },
            }
        )
    preferred.extend(
        {"weight": 1, "preference": {"matchExpressions": [_expression(req)]}}
        for req in spec.preferred
    )
    node_affinity: dict[str, Any] = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [_expression(r) for r in spec.required]}]
        }
    }
    if preferred:
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    container: dict[str, Any] = {
        "name": "pause",
        "image": spec.image or default_image,
        "resources": {
            "requests": {name: format_quantity(v) for name, v in sorted(spec.requests.items())}
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": 65535,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    pod_spec: dict[str, Any] = {
        "priorityClassName": spec.priority_class or default_priority_class,
        "preemptionPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "restartPolicy": "Always",
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "terminationGracePeriodSeconds": 0,
        "containers": [container],
        "affinity": {"nodeAffinity": node_affinity},
    }
    if spec.tolerations:
        pod_spec["tolerations"] = [
            {"key": t.key, "operator": "Equal", "value": t.value, "effect": t.effect}
            for t in spec.tolerations
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": spec.name,
            "namespace": spec.namespace,
            "labels": {**dict(spec.labels), MANAGED_BY: "fleetgate"},
            "annotations": dict(spec.annotations),
        },
        "spec": pod_spec,
    }
