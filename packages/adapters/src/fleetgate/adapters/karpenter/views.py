"""Kubernetes JSON objects -> the domain's observation values (``domain.rotation.cluster``).

Every function takes the object as the API serves it (camelCase JSON, already decoded) and
returns a frozen domain value. Fields are read as the ``karpenter.sh/v1`` CRDs define them
(checked against kubernetes-sigs/karpenter v1.0 through v1.14): an absent ``expireAfter`` is the
CRD default ``720h`` (the API server fills it in on create; an object that somehow lacks it is
read the same way), ``Never`` is no expiry. A field Karpenter or Kubernetes could not have
written (a duration that does not parse, a quantity that is not one) is an error naming the
object and the field: the pass for that pool stops rather than acting on a guess.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from fleetgate.adapters.karpenter.quantity import parse_resources
from fleetgate.domain.durations import parse_duration
from fleetgate.domain.rotation.budgets import budgets_failing_closed
from fleetgate.domain.rotation.cluster import (
    NodeClaimView,
    NodeView,
    PodView,
    PoolObservation,
    Requirement,
    Taint,
)

Obj = Mapping[str, Any]

HOSTNAME_LABEL = "kubernetes.io/hostname"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def parse_time(value: Any, where: str) -> datetime | None:
    """A Kubernetes ``Time``/``MicroTime`` (RFC3339, or a datetime) as an aware UTC datetime."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{where}: {value!r} is not an RFC3339 time") from None
    return parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)


EXPIRE_AFTER_DEFAULT = "720h"
"""The v1 CRDs' default ``expireAfter`` (NodePool template and NodeClaim alike)."""


def parse_expiry(value: Any, where: str) -> timedelta | None:
    """``expireAfter``: a Go duration, ``Never`` for no expiry, absent for the CRD's 720h."""
    if value == "Never":
        return None
    return _duration(EXPIRE_AFTER_DEFAULT if value is None else value, where)


def _duration(value: Any, where: str) -> timedelta | None:
    if value is None:
        return None
    try:
        return parse_duration(str(value))
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _where(kind: str, obj: Obj) -> str:
    meta = _meta(obj)
    ns = meta.get("namespace")
    return f"{kind} {ns + '/' if ns else ''}{meta.get('name', '?')}"


def condition_true(obj: Obj, kind: str) -> bool:
    """Whether ``status.conditions`` has ``kind`` exactly ``True`` (absent/Unknown/False: no)."""
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond.get("type") == kind:
            return bool(cond.get("status") == "True")
    return False


def true_condition_reason(obj: Obj, kind: str) -> str | None:
    """The ``reason`` of condition ``kind`` when it is exactly True (else None)."""
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond.get("type") == kind and cond.get("status") == "True":
            return str(cond.get("reason") or kind)
    return None


def requirements(items: Sequence[Obj] | None) -> tuple[Requirement, ...]:
    """Node-selector requirements (``key``/``operator``/``values``) as domain values."""
    return tuple(
        Requirement(str(r["key"]), str(r["operator"]), tuple(str(v) for v in r.get("values") or ()))
        for r in items or ()
    )


def claim_view(obj: Obj) -> NodeClaimView:
    """A ``karpenter.sh/v1`` NodeClaim."""
    where = _where("nodeclaim", obj)
    meta, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
    created = parse_time(meta.get("creationTimestamp"), f"{where}: metadata.creationTimestamp")
    if created is None:
        raise ValueError(f"{where}: metadata.creationTimestamp is missing")
    return NodeClaimView(
        name=str(meta["name"]),
        created_at=created,
        expire_after=parse_expiry(spec.get("expireAfter"), f"{where}: spec.expireAfter"),
        termination_grace_period=_duration(
            spec.get("terminationGracePeriod"), f"{where}: spec.terminationGracePeriod"
        ),
        ready=condition_true(obj, "Ready"),
        node_name=status.get("nodeName") or None,
        deleting_at=parse_time(
            meta.get("deletionTimestamp"), f"{where}: metadata.deletionTimestamp"
        ),
        annotations=dict(meta.get("annotations") or {}),
        labels=dict(meta.get("labels") or {}),
        requirements=requirements(spec.get("requirements")),
        allocatable=parse_resources(status.get("allocatable"), f"{where}: status.allocatable"),
        # Karpenter sets DisruptionReason (v1.2+) when it decides to replace the claim.
        disruption_reason=true_condition_reason(obj, "DisruptionReason"),
        drifted=condition_true(obj, "Drifted"),
        # Drained, and the cloud provider is deleting the instance (Karpenter's termination
        # controller, awaitInstanceTermination): the budgets stop counting the claim.
        instance_terminating=condition_true(obj, "InstanceTerminating"),
    )


def node_view(obj: Obj) -> NodeView:
    """A core/v1 Node."""
    meta, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
    return NodeView(
        name=str(meta["name"]),
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        unschedulable=bool(spec.get("unschedulable")),
        ready=condition_true(obj, "Ready"),
        allocatable=parse_resources(
            status.get("allocatable"), f"{_where('node', obj)}: status.allocatable"
        ),
        taints=taints(spec.get("taints")),
    )


def effective_requests(pod_spec: Obj, where: str) -> dict[str, int]:
    """What the scheduler reserves for a Pod: containers, sidecars, init containers, overhead.

    Regular containers and restartable init containers (sidecars) run together and add up; each
    plain init container runs alone beside the sidecars started before it, so the Pod needs the
    larger of the two, per resource (the Kubernetes 1.29+ rule), plus ``spec.overhead``.
    """

    def requests_of(container: Obj, index: str) -> dict[str, int]:
        return parse_resources(
            ((container.get("resources") or {}).get("requests")),
            f"{where}: {index}.resources.requests",
        )

    running: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    for i, c in enumerate(pod_spec.get("initContainers") or ()):
        req = requests_of(c, f"spec.initContainers[{i}]")
        if c.get("restartPolicy") == "Always":
            _add(sidecars, req)
            _peak(init_peak, sidecars)
        else:
            _peak(init_peak, {k: v + sidecars.get(k, 0) for k, v in req.items()})
    for i, c in enumerate(pod_spec.get("containers") or ()):
        _add(running, requests_of(c, f"spec.containers[{i}]"))
    _add(running, sidecars)
    total = dict(running)
    _peak(total, init_peak)
    _add(total, parse_resources(pod_spec.get("overhead"), f"{where}: spec.overhead"))
    return total


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for k, v in more.items():
        into[k] = into.get(k, 0) + v


def _peak(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        into[k] = max(into.get(k, 0), v)


def pod_view(obj: Obj) -> PodView:
    """A core/v1 Pod, with what the domain needs to size a placeholder and read its state."""
    where = _where("pod", obj)
    meta, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
    owner = next((o for o in meta.get("ownerReferences") or () if o.get("controller")), None)
    terms = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms") or ()
    hostnames = tuple(
        tuple(
            str(v)
            for e in term.get("matchExpressions") or ()
            if e.get("key") == HOSTNAME_LABEL and e.get("operator") == "In"
            for v in e.get("values") or ()
        )
        for term in terms
    )
    scheduled = next(
        (c for c in status.get("conditions") or () if c.get("type") == "PodScheduled"), None
    )
    unschedulable = scheduled is not None and scheduled.get("status") == "False"
    return PodView(
        namespace=str(meta.get("namespace", "")),
        name=str(meta["name"]),
        node_name=spec.get("nodeName") or None,
        phase=str(status.get("phase") or "Pending"),
        deleting=bool(meta.get("deletionTimestamp")),
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        requests=effective_requests(spec, where),
        owner_kind=str(owner["kind"]) if owner else None,
        mirror=MIRROR_ANNOTATION in (meta.get("annotations") or {}),
        node_selector=dict(spec.get("nodeSelector") or {}),
        required_hostnames=hostnames,
        unschedulable_reason=(scheduled.get("reason") or "")
        if unschedulable and scheduled
        else None,
        unschedulable_message=(scheduled.get("message") or "")
        if unschedulable and scheduled
        else None,
        started_at=parse_time(status.get("startTime"), f"{where}: status.startTime"),
    )


def taints(items: Sequence[Obj] | None) -> tuple[Taint, ...]:
    """Taints (a NodePool template's, or a Node's ``spec.taints``)."""
    return tuple(
        Taint(str(t["key"]), str(t.get("value") or ""), str(t.get("effect") or "NoSchedule"))
        for t in items or ()
    )


def pool_observation(
    pool: Obj,
    claims: Sequence[Obj],
    nodes: Sequence[Obj],
    pods: Sequence[Obj],
    placeholders: Sequence[Obj],
) -> PoolObservation:
    """One NodePool with its claims, nodes, their pods and its placeholders (each list by name)."""
    where = _where("nodepool", pool)
    meta, spec, status = _meta(pool), pool.get("spec") or {}, pool.get("status") or {}
    template = ((spec.get("template") or {}).get("spec")) or {}
    resources = parse_resources(status.get("resources"), f"{where}: status.resources")
    if "nodes" not in resources and isinstance(status.get("nodes"), int):
        resources["nodes"] = status["nodes"] * 1000  # v1.8+ also counts them in status.nodes
    replicas = spec.get("replicas")
    if replicas is not None and (
        isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0
    ):
        raise ValueError(f"{where}: spec.replicas: {replicas!r} is not a count")

    budgets, budget_problems = budgets_failing_closed((spec.get("disruption") or {}).get("budgets"))

    def by_name(o: Obj) -> tuple[str, str]:
        return (str(_meta(o).get("namespace", "")), str(_meta(o).get("name", "")))

    return PoolObservation(
        name=str(meta["name"]),
        version=str(meta.get("resourceVersion", "")),
        expire_after=parse_expiry(
            template.get("expireAfter"), f"{where}: spec.template.spec.expireAfter"
        ),
        termination_grace_period=_duration(
            template.get("terminationGracePeriod"),
            f"{where}: spec.template.spec.terminationGracePeriod",
        ),
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        requirements=requirements(template.get("requirements")),
        taints=taints(template.get("taints")),
        limits=parse_resources(spec.get("limits"), f"{where}: spec.limits"),
        resources=resources,
        claims=tuple(claim_view(c) for c in sorted(claims, key=by_name)),
        nodes=tuple(node_view(n) for n in sorted(nodes, key=by_name)),
        pods=tuple(pod_view(p) for p in sorted(pods, key=by_name)),
        placeholders=tuple(pod_view(p) for p in sorted(placeholders, key=by_name)),
        replicas=replicas,
        ready=condition_true(pool, "Ready"),
        budgets=budgets,
        budget_problems=tuple(f"{where}: {problem}" for problem in budget_problems),
    )
