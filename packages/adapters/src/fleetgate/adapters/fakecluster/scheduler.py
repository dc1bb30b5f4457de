"""kube-scheduler and Karpenter's provisioner, reduced to what the rotation controller can observe.

Pending Pods are taken highest priority first, oldest first. Each is bound to the first Ready,
schedulable node of its pool with room (nodes the Pod would rather avoid come last); failing that
a workload Pod preempts lower-priority Pods (placeholders); failing that the Pod is nominated to
an in-flight claim with room, or Karpenter launches a new claim for it, unless the pool is out of
capacity or over its limits, in which case the Pod is marked Unschedulable. As in Karpenter,
whose provisioner acts only on a Pod the kube-scheduler marked Unschedulable and did not bind
(``IsProvisionable``), a placeholder that fits a node that already exists is bound there and
nothing is launched: the rotation then has no new node to count (issue 41). As in Karpenter, a
static NodePool (``spec.replicas`` set) and a NodePool whose Ready condition is not True never
provision for a pending Pod (see ``KarpenterLifecycle.refuses_to_provision``).

The questions asked of the fleet on every Pod (which nodes have room, which host lower-priority
Pods) are answered by the cluster's indexed tables (see ``tables``). What the scheduler needs of
Karpenter is the ``Provisioner`` protocol, so this module depends on no room that calls it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Protocol

from fleetgate.adapters.fakecluster.journal import Journal
from fleetgate.adapters.fakecluster.model import Claim, Node, Pod, Pool, fits, subtract
from fleetgate.adapters.fakecluster.state import ClusterState
from fleetgate.adapters.fakecluster.timeline import Timeline

BATCH = timedelta(seconds=1)
"""Karpenter's batch idle duration: how long Pods stay Pending before a launch decision."""


class Provisioner(Protocol):
    """What the scheduler needs of Karpenter (``lifecycle.KarpenterLifecycle``)."""

    state: ClusterState
    journal: Journal
    timeline: Timeline

    def refuses_to_provision(self, pool: Pool) -> str | None:
        """Why no claim is launched for a pending Pod of ``pool`` (None: one may be)."""
        ...

    def exceeded_limit(self, pool: Pool) -> str | None:
        """The ``spec.limits`` entry one more node of ``pool`` would exceed (None: none)."""
        ...

    def provision(self, pool: Pool, at: datetime, *, batched: bool = True) -> Claim:
        """Launch a new claim for ``pool``."""
        ...

    def delete_pod(self, pod: Pod, at: datetime, kind: str) -> None:
        """Delete ``pod`` (a preempted placeholder)."""
        ...


class Scheduler:
    """Places the Pending Pods; a call made while it runs (a binding that frees or launches
    something) is folded into the running one, which then goes round again."""

    def __init__(self, karpenter: Provisioner) -> None:
        self.karpenter = karpenter
        self.running = False
        self._rerun = False

    def schedule(self, at: datetime) -> None:
        """Place every Pending Pod that can be placed."""
        if self.running:
            self._rerun = True
            return
        self.running = True
        karpenter = self.karpenter
        pods = karpenter.state.pods
        try:
            again = True
            while again:
                self._rerun = False
                again = False
                pending = sorted(pods.pending.values(), key=lambda p: (-p.priority, p.seq))
                for pod in pending:
                    if pods.get(pod.key) is not pod:
                        continue
                    node = _best_node(karpenter, pod)
                    if node is not None:
                        _bind(karpenter, pod, node, at)
                        again = True
                    elif pod.priority >= 0 and _preempt(karpenter, pod, at):
                        again = True
                    else:
                        _provision_for(karpenter, pod, at)
                again = again or self._rerun
        finally:
            self.running = False


def _eligible_nodes(karpenter: Provisioner, pod: Pod, nodes: Iterable[Node]) -> list[Node]:
    """Those of ``nodes`` the Pod may be bound to, in the order they are tried: by name, with
    the claim Karpenter launched for it first and the hosts it would rather avoid last."""
    out = []
    claims = karpenter.state.claims
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


def _best_node(karpenter: Provisioner, pod: Pod) -> Node | None:
    # Only nodes with room are looked at: the index keeps each node's free capacity sorted.
    candidates = _eligible_nodes(karpenter, pod, karpenter.state.pods.roomy(pod.requests))
    return candidates[0] if candidates else None


def _bind(karpenter: Provisioner, pod: Pod, node: Node, at: datetime) -> None:
    pod.node_name = node.name
    pod.pending_since = None
    pod.nominated_claim = None
    pod.unschedulable_message = None
    kind = "placeholder-bound" if pod.priority < 0 and pod.owner_kind is None else "pod-bound"
    karpenter.journal.record(at, kind, pod.name, node.pool, node=node.name)


def _preempt(karpenter: Provisioner, pod: Pod, at: datetime) -> bool:
    # Only a node hosting a Pod of lower priority has anything to preempt.
    table = karpenter.state.pods
    for node in _eligible_nodes(karpenter, pod, table.hosts_below(pod.priority)):
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
                karpenter.delete_pod(victim, at, "placeholder-preempted")
            _bind(karpenter, pod, node, at)
            return True
    return False


def _provision_for(karpenter: Provisioner, pod: Pod, at: datetime) -> None:
    if pod.pool is None or pod.pool not in karpenter.state.pools:
        pod.unschedulable_message = "no NodePool matches the Pod"
        return
    nominated = karpenter.state.claims.get(pod.nominated_claim or "")
    if nominated is not None and nominated.deleting_at is None and not nominated.ready:
        return  # Karpenter already launched a claim for it; wait for it
    pool = karpenter.state.pools[pod.pool]
    refused = karpenter.refuses_to_provision(pool)
    if refused is not None:
        pod.unschedulable_message = refused
        return
    if not fits(pool.node_allocatable, pod.requests):
        pod.unschedulable_message = f"no instance type of NodePool {pool.name} fits the requests"
        return
    # The pool's claims still launching, by name, each with what is nominated to it already.
    for claim in karpenter.state.claims.launching_in(pool.name):
        load = [p.requests for p in karpenter.state.pods.nominated_to(claim.name)]
        if fits(subtract(claim.allocatable, *load), pod.requests):
            pod.nominated_claim = claim.name
            pod.unschedulable_message = None
            return
    # Karpenter batches pending Pods for a moment before it launches anything.
    since = pod.pending_since or at
    pod.pending_since = since
    if at < since + BATCH:
        karpenter.timeline.at(since + BATCH, "batch", pool.name)
        return
    if pool.name in karpenter.state.faults.capacity_shortage:
        pod.unschedulable_message = (
            f"NodePool {pool.name}: insufficient capacity to launch a node (capacity shortage)"
        )
        return
    exceeded = karpenter.exceeded_limit(pool)
    if exceeded is not None:
        pod.unschedulable_message = f"NodePool {pool.name}: launching a node exceeds {exceeded}"
        return
    claim = karpenter.provision(pool, at)
    pod.nominated_claim = claim.name
    pod.unschedulable_message = None
