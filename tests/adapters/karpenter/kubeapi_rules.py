"""What a real API server does to an object on every write, beyond storing it (test support).

- ``metadata.generation`` starts at 1 and goes up by one whenever ``spec`` changes (status and
  metadata writes leave it alone), so a watcher keyed on it sees spec changes only;
- the ``karpenter.sh/v1`` CRDs' defaults are filled in (``expireAfter: 720h`` on NodeClaims and
  NodePool templates, the NodePool ``disruption`` defaults), as the structural-schema defaulting
  of the real server does (checked against kubernetes-sigs/karpenter v1.0 to v1.14);
- kinds with a ``status`` subresource ignore ``status`` in writes to the main resource and
  everything but ``status`` in writes to the subresource; on create, CRDs drop ``status`` and a
  Pod starts ``Pending``;
- a Pod's ``spec.terminationGracePeriodSeconds`` defaults to 30 (kubernetes
  ``pkg/apis/core/v1/defaults.go``, ``SetDefaults_PodSpec``), which Karpenter's drain reads.
"""

from __future__ import annotations

import copy
from typing import Any

Obj = dict[str, Any]

#: Kinds served with a ``status`` subresource (Leases and Events have none; the chart's
#: RotationPolicy CRDs declare ``subresources: {status: {}}``).
STATUS_KINDS = frozenset(
    {"NodePool", "NodeClaim", "Node", "Pod", "RotationPolicy", "PodDisruptionBudget"}
)

#: CRDs among them: their status is dropped on create.
CRD_KINDS = frozenset({"NodePool", "NodeClaim", "RotationPolicy"})

EXPIRE_AFTER_DEFAULT = "720h"
POD_GRACE_DEFAULT = 30  # v1.DefaultTerminationGracePeriodSeconds


def apply_defaults(kind: str, obj: Obj) -> None:
    """Fill in the defaults of a NodePool, a NodeClaim (the v1 CRDs') or a Pod, in place."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    if kind == "NodeClaim":
        spec.setdefault("expireAfter", EXPIRE_AFTER_DEFAULT)
    elif kind == "Pod":
        spec.setdefault("terminationGracePeriodSeconds", POD_GRACE_DEFAULT)
    elif kind == "NodePool":
        template = spec.setdefault("template", {}).setdefault("spec", {})
        template.setdefault("expireAfter", EXPIRE_AFTER_DEFAULT)
        disruption = spec.setdefault("disruption", {})
        disruption.setdefault("consolidateAfter", "0s")
        disruption.setdefault("consolidationPolicy", "WhenEmptyOrUnderutilized")
        disruption.setdefault("budgets", [{"nodes": "10%"}])


def on_create(kind: str, obj: Obj, *, via_api: bool) -> None:
    """Defaults and generation of a new object; ``via_api`` also applies the status rules (a
    test's ``seed`` stores an object as a controller would have left it, status included)."""
    apply_defaults(kind, obj)
    obj["metadata"]["generation"] = 1
    if via_api and kind in CRD_KINDS:
        obj.pop("status", None)
    elif via_api and kind == "Pod":
        obj["status"] = {"phase": "Pending"}


def on_update(kind: str, current: Obj, new: Obj, subresource: str | None) -> None:
    """Apply the status rules and the generation bump to ``new``, replacing ``current``."""
    if kind in STATUS_KINDS:
        if subresource == "status":
            status = new.get("status")
            new.clear()
            new.update(copy.deepcopy({k: v for k, v in current.items() if k != "status"}))
            if status is not None:
                new["status"] = status
        elif "status" in current:
            new["status"] = copy.deepcopy(current["status"])
        else:
            new.pop("status", None)
    apply_defaults(kind, new)
    generation = int(current["metadata"].get("generation") or 1)
    bumped = new.get("spec") != current.get("spec")
    new["metadata"]["generation"] = generation + 1 if bumped else generation
