"""kube-scheduler and Karpenter's provisioner, reduced to what the rotation controller can observe.

Pending Pods are taken highest priority first, oldest first. Each is bound to the first Ready,
schedulable node of its pool with room (nodes the Pod would rather avoid come last); failing that
a workload Pod preempts lower-priority Pods (placeholders); failing that the Pod is nominated to
an in-flight claim with room, or Karpenter launches a new claim for it, unless the pool is out of
capacity or over its limits, in which case the Pod is marked Unschedulable.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from fleetgate.adapters.fakecluster.model import Node, Pod, fits, fits_after, subtract

if TYPE_CHECKING:
    from fleetgate.adapters.fakecluster.lifecycle import KarpenterLifecycle as FakeCluster

BATCH = timedelta(seconds=1)
"""Karpenter's batch idle duration: how long Pods stay Pending before a launch decision."""


def schedule(cluster: FakeCluster, at: datetime) -> None:
    """Place every Pending Pod that can be placed (re-entrant calls fold into the outer one)."""
    if cluster._scheduling:
        cluster._rerun = True
        return
    cluster._scheduling = True
    try:
        again = True
        while again:
            cluster._rerun = False
            again = False
            pending = sorted(
                (p for p in cluster.pods.values() if p.node_name is None),
                key=lambda p: (-p.priority, p.seq),
            )
            for pod in pending:
                if cluster.pods.get(pod.key) is not pod:
                    continue
                node = _best_node(cluster, pod)
                if node is not None:
                    _bind(cluster, pod, node, at)
                    again = True
                elif pod.priority >= 0 and _preempt(cluster, pod, at):
                    again = True
                else:
                    _provision_for(cluster, pod, at)
            again = again or cluster._rerun
    finally:
        cluster._scheduling = False


def _eligible_nodes(cluster: FakeCluster, pod: Pod) -> list[Node]:
    nodes = []
    for claim in cluster.claims_by_name():
        node = claim.node
        if node is None or not node.ready or node.unschedulable or claim.deleting_at is not None:
            continue
        if pod.pool is not None and claim.pool != pod.pool:
            continue
        if not all(
            req.operator != "In" or node.labels.get(req.key) in req.values for req in pod.required
        ):
            continue
        nodes.append(node)
    # Soft anti-affinity: hosts the Pod would rather avoid are tried last, never excluded.
    return sorted(nodes, key=lambda n: (n.name in pod.avoid_hosts, n.name != pod.nominated_claim))


def _bound_requests(cluster: FakeCluster) -> dict[str, list[dict[str, int]]]:
    """The requests of the bound Pods, by node: one pass instead of one per candidate node."""
    by_node: dict[str, list[dict[str, int]]] = {}
    for p in cluster.pods.values():
        if p.node_name is not None:
            by_node.setdefault(p.node_name, []).append(p.requests)
    return by_node


def _best_node(cluster: FakeCluster, pod: Pod) -> Node | None:
    # free_on per candidate would scan every Pod once per node: quadratic in a 10,000-node pool.
    bound: dict[str, list[dict[str, int]]] | None = None
    for node in _eligible_nodes(cluster, pod):
        if bound is None:
            bound = _bound_requests(cluster)
        if fits_after(node.allocatable, bound.get(node.name, ()), pod.requests):
            return node
    return None


def _bind(cluster: FakeCluster, pod: Pod, node: Node, at: datetime) -> None:
    pod.node_name = node.name
    pod.pending_since = None
    pod.nominated_claim = None
    pod.unschedulable_message = None
    kind = "placeholder-bound" if pod.priority < 0 and pod.owner_kind is None else "pod-bound"
    cluster._record(at, kind, pod.name, node.pool, node=node.name)


def _preempt(cluster: FakeCluster, pod: Pod, at: datetime) -> bool:
    # The bound Pods by node, gathered once: a scan of every Pod per candidate node is
    # quadratic in a 10,000-node pool (an evicted workload Pod tries every node).
    bound: dict[str, list[Pod]] | None = None
    for node in _eligible_nodes(cluster, pod):
        if bound is None:
            bound = {}
            for p in cluster.pods.values():
                if p.node_name is not None:
                    bound.setdefault(p.node_name, []).append(p)
        on_node = bound.get(node.name, [])
        victims = sorted(
            (p for p in on_node if p.priority < pod.priority),
            key=lambda p: (p.priority, -p.seq),
        )
        free = subtract(node.allocatable, *(p.requests for p in on_node))
        chosen = []
        for victim in victims:
            if fits(free, pod.requests):
                break
            chosen.append(victim)
            for name, value in victim.requests.items():
                free[name] = free.get(name, 0) + value
        if chosen and fits(free, pod.requests):
            for victim in chosen:
                cluster._delete_pod(victim, at, "placeholder-preempted")
            _bind(cluster, pod, node, at)
            return True
    return False


def _provision_for(cluster: FakeCluster, pod: Pod, at: datetime) -> None:
    if pod.pool is None or pod.pool not in cluster.pools:
        pod.unschedulable_message = "no NodePool matches the Pod"
        return
    nominated = cluster.claims.get(pod.nominated_claim or "")
    if nominated is not None and nominated.deleting_at is None and not nominated.ready:
        return  # Karpenter already launched a claim for it; wait for it
    pool = cluster.pools[pod.pool]
    if not fits(pool.node_allocatable, pod.requests):
        pod.unschedulable_message = f"no instance type of NodePool {pool.name} fits the requests"
        return
    for claim in cluster.claims_by_name():
        if claim.pool != pool.name or claim.ready or claim.deleting_at is not None:
            continue
        load = [p.requests for p in cluster.pods.values() if p.nominated_claim == claim.name]
        if fits(subtract(claim.allocatable, *load), pod.requests):
            pod.nominated_claim = claim.name
            pod.unschedulable_message = None
            return
    # Karpenter batches pending Pods for a moment before it launches anything.
    since = pod.pending_since or at
    pod.pending_since = since
    if at < since + BATCH:
        cluster._at(since + BATCH, "batch", pool.name)
        return
    if pool.name in cluster.faults.capacity_shortage:
        pod.unschedulable_message = (
            f"NodePool {pool.name}: insufficient capacity to launch a node (capacity shortage)"
        )
        return
    used = cluster.pool_resources(pool.name)
    for name, limit in pool.limits.items():
        if used.get(name, 0) + pool.node_allocatable.get(name, 0) > limit:
            pod.unschedulable_message = (
                f"NodePool {pool.name}: launching a node exceeds limits.{name}"
            )
            return
    claim = cluster.provision(pool, at)
    pod.nominated_claim = claim.name
    pod.unschedulable_message = None
