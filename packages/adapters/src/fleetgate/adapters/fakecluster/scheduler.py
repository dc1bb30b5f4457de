"""kube-scheduler and Karpenter's provisioner, reduced to what the rotation controller can observe.

Pending Pods are taken highest priority first, oldest first. Each is bound to the first Ready,
schedulable node of its pool with room (nodes the Pod would rather avoid come last); failing that
a workload Pod preempts lower-priority Pods (placeholders); failing that the Pod is nominated to
an in-flight claim with room, or Karpenter launches a new claim for it, unless the pool is out of
capacity or over its limits, in which case the Pod is marked Unschedulable. As in Karpenter, a
static NodePool (``spec.replicas`` set) and a NodePool whose Ready condition is not True never
provision for a pending Pod (see ``KarpenterLifecycle.refuses_to_provision``).

The questions asked of the fleet on every Pod (which nodes have room, which host lower-priority
Pods) are answered by the cluster's indexed tables (see ``tables``).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from fleetgate.adapters.fakecluster.model import Node, Pod, fits, subtract

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
            pending = sorted(cluster.pods.pending.values(), key=lambda p: (-p.priority, p.seq))
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


def _eligible_nodes(cluster: FakeCluster, pod: Pod, nodes: Iterable[Node]) -> list[Node]:
    """Those of ``nodes`` the Pod may be bound to, in the order they are tried: by name, with
    the claim Karpenter launched for it first and the hosts it would rather avoid last."""
    out = []
    claims = cluster.claims
    for node in nodes:
        claim = claims.get(node.name)
        if claim is None or claim.node is not node:
            continue
        if not node.ready or node.unschedulable or claim.deleting_at is not None:
            continue
        if pod.pool is not None and claim.pool != pod.pool:
            continue
        if not all(
            req.operator != "In" or node.labels.get(req.key) in req.values for req in pod.required
        ):
            continue
        out.append(node)
    # Soft anti-affinity: hosts the Pod would rather avoid are tried last, never excluded.
    return sorted(
        out, key=lambda n: (n.name in pod.avoid_hosts, n.name != pod.nominated_claim, n.name)
    )


def _best_node(cluster: FakeCluster, pod: Pod) -> Node | None:
    # Only nodes with room are looked at: the index keeps each node's free capacity sorted.
    candidates = _eligible_nodes(cluster, pod, cluster.pods.roomy(cluster, pod.requests))
    return candidates[0] if candidates else None


def _bind(cluster: FakeCluster, pod: Pod, node: Node, at: datetime) -> None:
    pod.node_name = node.name
    pod.pending_since = None
    pod.nominated_claim = None
    pod.unschedulable_message = None
    kind = "placeholder-bound" if pod.priority < 0 and pod.owner_kind is None else "pod-bound"
    cluster._record(at, kind, pod.name, node.pool, node=node.name)


def _preempt(cluster: FakeCluster, pod: Pod, at: datetime) -> bool:
    # Only a node hosting a Pod of lower priority has anything to preempt.
    table = cluster.pods
    for node in _eligible_nodes(cluster, pod, table.hosts_below(cluster, pod.priority)):
        on_node = list(table.bound.get(node.name, {}).values())
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
    refused = cluster.refuses_to_provision(pool)
    if refused is not None:
        pod.unschedulable_message = refused
        return
    if not fits(pool.node_allocatable, pod.requests):
        pod.unschedulable_message = f"no instance type of NodePool {pool.name} fits the requests"
        return
    # The pool's claims still launching, by name, each with what is nominated to it already.
    for claim in cluster.claims.launching_in(pool.name):
        load = [p.requests for p in cluster.pods.nominated_to(claim.name)]
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
    exceeded = cluster.exceeded_limit(pool)
    if exceeded is not None:
        pod.unschedulable_message = f"NodePool {pool.name}: launching a node exceeds {exceeded}"
        return
    claim = cluster.provision(pool, at)
    pod.nominated_claim = claim.name
    pod.unschedulable_message = None
