"""The surge placeholder Pod (spec §7.5): its name, its footprint, the clamp and its affinity."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.cluster import (
    NodeClaimView,
    NodeView,
    PlaceholderSpec,
    PodView,
    PoolObservation,
    Requirement,
)

NAME_PREFIX = "fleetgate-surge-"
HOSTNAME_LABEL = "kubernetes.io/hostname"
MAX_NAME = 253


def placeholder_name(claim: str) -> str:
    """``fleetgate-surge-<claim>``; past 253 characters the claim part is cut and hashed."""
    name = NAME_PREFIX + claim
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(claim.encode()).hexdigest()[:16]
    return name[: MAX_NAME - 17] + "-" + digest


def node_pinned(pod: PodView, node: str) -> bool:
    """True when the Pod can only run on ``node`` (its hostname selector or affinity says so)."""
    if pod.node_selector.get(HOSTNAME_LABEL) == node:
        return True
    terms = pod.required_hostnames
    if not terms or any(not term for term in terms):
        return False
    return {host for term in terms for host in term} == {node}


def footprint(pods: Iterable[PodView], node: str) -> dict[str, int]:
    """The summed requests of the Pods a surge must make room for (movable workload only)."""
    total: dict[str, int] = {}
    for pod in pods:
        if pod.node_name != node or pod.owner_kind == "DaemonSet" or pod.mirror:
            continue
        if pod.phase in ("Succeeded", "Failed") or node_pinned(pod, node):
            continue
        for name, value in pod.requests.items():
            total[name] = total.get(name, 0) + value
    return total


@dataclass(frozen=True)
class Clamp:
    """The placeholder's requests after the clamp, and the verdicts for the events (§7.5)."""

    requests: dict[str, int]
    clamped: tuple[str, ...] = ()
    band_exceeded: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()


def clamp(
    want: dict[str, int],
    claim: NodeClaimView,
    node: NodeView | None,
    daemon_pods: Sequence[PodView],
) -> Clamp:
    """Clamp the footprint to what a fresh node of the claim's size can hold beside DaemonSets.

    A resource with no room at all is *refused*: the full request is kept (the surge will not
    schedule and rolls back) rather than shrinking the placeholder to nothing.
    """
    if not claim.allocatable:
        return Clamp(requests=dict(want))
    out = dict(want)
    clamped: list[str] = []
    exceeded: list[str] = []
    refused: list[str] = []
    for name in sorted(want):
        if name not in claim.allocatable:
            continue
        daemons = sum(p.requests.get(name, 0) for p in daemon_pods if p.phase == "Running")
        limit = claim.allocatable[name] - daemons
        if limit <= 0 and want[name] > 0:
            refused.append(name)
        elif want[name] > limit:
            out[name] = limit
            clamped.append(name)
            node_alloc = node.allocatable.get(name, 0) if node else 0
            band = max(0, node_alloc - claim.allocatable.get(name, 0))
            if want[name] - limit > band:
                exceeded.append(name)
    return Clamp(out, tuple(clamped), tuple(exceeded), tuple(refused))


def allows(requirement: Requirement, value: str) -> bool:
    """Whether a template requirement lets a node carry ``value`` under its key."""
    op = requirement.operator
    if op == "In":
        return value in requirement.values
    if op == "NotIn":
        return value not in requirement.values
    if op == "Exists":
        return True
    if op == "DoesNotExist":
        return False
    if op in ("Gt", "Lt", "Gte", "Lte"):
        try:
            have, bound = int(value), int(requirement.values[0])
        except (ValueError, IndexError):
            return False  # a malformed bound drops the value
        return {"Gt": have > bound, "Lt": have < bound, "Gte": have >= bound, "Lte": have <= bound}[
            op
        ]
    return False


def key_values(
    key: str, claim: NodeClaimView, node: NodeView | None, template: Sequence[Requirement]
) -> tuple[str, ...]:
    """Values the surge node may take for ``key``: the old node's, allowed by the template."""
    if node is not None and key in node.labels:
        candidates: tuple[str, ...] = (node.labels[key],)
    else:
        candidates = tuple(
            v for r in claim.requirements if r.key == key and r.operator == "In" for v in r.values
        )
    rules = [r for r in template if r.key == key]
    return tuple(sorted({v for v in candidates if all(allows(r, v) for r in rules)}))


def build_placeholder(
    obs: PoolObservation,
    claim: NodeClaimView,
    *,
    namespace: str,
    required_keys: Sequence[str],
    preferred_keys: Sequence[str],
    avoid_hosts: Sequence[str],
) -> tuple[PlaceholderSpec, Clamp]:
    """The placeholder for ``claim``: sized like its movable Pods, pinned to its pool and keys."""
    node = obs.node(claim.node_name)
    on_node = obs.pods_on(claim.node_name) if claim.node_name else ()
    daemons = [p for p in on_node if p.owner_kind == "DaemonSet"]
    sized = clamp(footprint(on_node, claim.node_name or ""), claim, node, daemons)
    required = [Requirement(ann.KARPENTER_NODEPOOL, "In", (obs.name,))]
    for key in required_keys:
        values = key_values(key, claim, node, obs.requirements)
        if values:
            required.append(Requirement(key, "In", values))
    preferred = []
    for key in preferred_keys:
        values = key_values(key, claim, node, obs.requirements)
        if values:
            preferred.append(Requirement(key, "In", values))
    spec = PlaceholderSpec(
        namespace=namespace,
        name=placeholder_name(claim.name),
        pool=obs.name,
        surge_for=claim.name,
        requests=sized.requests,
        required=tuple(required),
        preferred=tuple(preferred),
        # Sorted as the census keeps them, but for the claim's own node: nearly in order,
        # which sorts in one pass (a set's order would be sorted from scratch).
        avoid_hosts=tuple(sorted(dict.fromkeys(avoid_hosts))),
        tolerations=obs.taints,
        labels={ann.SURGE_FOR: claim.name, ann.KARPENTER_NODEPOOL: obs.name},
        annotations={ann.KARPENTER_DO_NOT_DISRUPT: ann.TRUE},
    )
    return spec, sized
