"""PodDisruptionBudgets and the ``pods/eviction`` subresource of the local API server (test
support), as the real server and its disruption controller behave.

A budget's ``status`` is what the disruption controller would write, kept current on every change
of a Pod or a budget: ``expectedPods`` (the matching Pods that are not terminal),
``currentHealthy`` (those Running and Ready, not terminating), ``desiredHealthy`` and
``disruptionsAllowed`` (computed by the fake cluster's ``pdb`` module, the project's one budget
arithmetic). An eviction (``POST .../pods/<name>/eviction``) is judged in the real server's
order (Kubernetes ``pkg/registry/core/pod/storage/eviction.go``, ``EvictionREST.Create``):

1. an Eviction whose ``metadata.name`` is not the Pod's in the URL: 400 ``BadRequest``;
2. no such Pod: 404;
3. a Pod that is Pending, terminal or already terminating goes whatever any budget says;
4. two budgets selecting the Pod: 500 (the server refuses to choose); one that allows no
   disruption: 429 ``TooManyRequests`` (see ``pdb.may_evict`` for unhealthy Pods);
5. only then is the Pod deleted with the Eviction's ``deleteOptions``, so a UID precondition
   that does not match is a 409, and a 429 comes first where a budget holds the Pod.
"""

from __future__ import annotations

from typing import Any

from fleetgate.adapters.fakecluster.pdb import desired_healthy, may_evict
from tests.adapters.karpenter.kubeapi_semantics import KubeError

Obj = dict[str, Any]

TOO_MANY = "Cannot evict pod as it would violate the pod's disruption budget."
NAME_MISMATCH = "name in URL does not match name in Eviction object"
TWO_BUDGETS = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not "
    "support."
)


def _selects(budget: Obj, pod: Obj) -> bool:
    """Whether the budget's ``spec.selector`` (matchLabels, matchExpressions) selects the Pod."""
    selector = (budget.get("spec") or {}).get("selector")
    if selector is None:
        return False  # a nil selector selects nothing in policy/v1
    labels = pod["metadata"].get("labels") or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for term in selector.get("matchExpressions") or ():
        key, op, values = term["key"], term["operator"], term.get("values") or []
        present = key in labels
        ok = {
            "In": present and labels.get(key) in values,
            "NotIn": not present or labels.get(key) not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }[op]
        if not ok:
            return False
    return True


def healthy(pod: Obj) -> bool:
    """Running, Ready and not terminating: what a budget counts as healthy."""
    status = pod.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )
    return (
        status.get("phase") == "Running" and ready and not pod["metadata"].get("deletionTimestamp")
    )


def _terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def budget_status(budget: Obj, pods: list[Obj]) -> Obj:
    """The status the disruption controller would write for ``budget`` over its namespace's Pods."""
    spec = budget.get("spec") or {}
    guarded = [p for p in pods if _selects(budget, p) and not _terminal(p)]
    expected, current = len(guarded), sum(healthy(p) for p in guarded)
    desired = desired_healthy(expected, spec.get("minAvailable"), spec.get("maxUnavailable"))
    return {
        "observedGeneration": budget["metadata"].get("generation", 1),
        "expectedPods": expected,
        "currentHealthy": current,
        "desiredHealthy": desired,
        "disruptionsAllowed": max(0, current - desired),
    }


def check_eviction(pod: Obj, budgets: list[Obj], pods: list[Obj]) -> None:
    """Raise the API server's refusal of evicting ``pod`` on behalf of its budgets (steps 3 and 4
    above), or return to let it be deleted."""
    phase = (pod.get("status") or {}).get("phase")
    if pod["metadata"].get("deletionTimestamp") or phase in ("Pending", "Succeeded", "Failed"):
        return  # nothing a budget protects: it goes
    guarding = [b for b in budgets if _selects(b, pod)]
    if len(guarding) > 1:
        raise KubeError(500, "InternalError", TWO_BUDGETS)
    if not guarding:
        return
    [budget] = guarding
    spec = budget.get("spec") or {}
    status = budget_status(budget, pods)
    allowed = may_evict(
        pod_healthy=healthy(pod),
        expected=status["expectedPods"],
        healthy=status["currentHealthy"],
        min_available=spec.get("minAvailable"),
        max_unavailable=spec.get("maxUnavailable"),
        unhealthy_policy=spec.get("unhealthyPodEvictionPolicy") or "IfHealthyBudget",
    )
    if not allowed:
        raise KubeError(429, "TooManyRequests", TOO_MANY)


def check_eviction_name(name: str, body: Any) -> None:
    """Step 1: the Eviction must name the Pod of the URL (a 400 before anything is looked up)."""
    given = ((body or {}).get("metadata") or {}).get("name") if isinstance(body, dict) else None
    if given != name:
        raise KubeError(400, "BadRequest", NAME_MISMATCH)
