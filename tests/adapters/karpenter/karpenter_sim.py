"""Karpenter's reactions, played against the local API server (test support).

Karpenter is not running here, so a test calls these steps where Karpenter would act: seed a
pool with NodeClaims and Nodes, ``provision()`` capacity for pending placeholder Pods (a new
NodeClaim + Node that is Ready, and the Pod bound and Running), and ``terminate()`` NodeClaims
whose deletion was requested (the drain ends: the claim's finalizer is lifted, the Node and its
Pods go). Objects look like karpenter.sh/v1 objects on EKS so the gateway parses real shapes.

The drain follows Karpenter's terminator (kubernetes-sigs/karpenter 2266468,
``pkg/controllers/node/termination/terminator/eviction.go`` and ``terminator.go``;
``pkg/controllers/nodeclaim/lifecycle/controller.go``; ``pkg/utils/pod/scheduling.go``): the
claim's deadline is its deletion plus its ``terminationGracePeriod``, written on the claim as
``karpenter.sh/nodeclaim-termination-timestamp``; a Pod is evicted (UID precondition) unless its
``karpenter.sh/do-not-disrupt`` is active, which holds it; once ``now`` passes the deadline less
the Pod's own ``terminationGracePeriodSeconds`` it is deleted regardless (PDB and opt-out
bypassed) with a grace of what is left to the deadline, at least 1 s; the node goes once no Pod
it waits for is left (a Pod terminating for over a minute past its deletion no longer counts).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from fleetgate.adapters.karpenter.views import parse_time, pod_view
from fleetgate.domain.durations import parse_duration
from fleetgate.domain.rotation.disruption import pod_opt_out_active
from tests.adapters.karpenter.kubeapi import KubeAPIServer, KubeError, Obj, Request, rfc3339
from tests.adapters.karpenter.kubeapi_store import parse_quantity_units

POOL_LABEL = "karpenter.sh/nodepool"
TERMINATION_FINALIZER = "karpenter.sh/termination"
TERMINATION_TIMESTAMP = "karpenter.sh/nodeclaim-termination-timestamp"
STUCK_TERMINATING = timedelta(minutes=1)  # IsStuckTerminating: a minute past deletion


def nodepool(
    name: str,
    *,
    expire_after: str = "336h",
    tgp: str | None = "1h",
    labels: dict[str, str] | None = None,
    taints: list[Obj] | None = None,
    limits: dict[str, str] | None = None,
    requirements: list[Obj] | None = None,
    replicas: int | None = None,
    ready: bool = True,
) -> Obj:
    """A karpenter.sh/v1 NodePool as EKS Auto Mode ships them, with the given template; Ready
    unless ``ready`` is False (Karpenter sets the condition), static when ``replicas`` is set."""
    template: Obj = {
        "nodeClassRef": {"group": "eks.amazonaws.com", "kind": "NodeClass", "name": "default"},
        "expireAfter": expire_after,
        "requirements": requirements
        if requirements is not None
        else [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        ],
    }
    if tgp is not None:
        template["terminationGracePeriod"] = tgp
    if taints:
        template["taints"] = taints
    spec: Obj = {"template": {"spec": template}, "disruption": {"consolidationPolicy": "WhenEmpty"}}
    if limits:
        spec["limits"] = limits
    if replicas is not None:
        spec["replicas"] = replicas
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
        "status": {
            "resources": {"cpu": "0", "memory": "0", "nodes": "0"},
            "conditions": [_condition("Ready", ready)],
        },
    }


@dataclass
class KarpenterSim:
    """Seeds nodes and plays Karpenter's provisioning and termination against ``api``."""

    api: KubeAPIServer
    zone: str = "us-east-1a"
    arch: str = "amd64"
    capacity_type: str = "on-demand"
    allocatable: dict[str, str] = field(
        default_factory=lambda: {"cpu": "3920m", "memory": "14Gi", "pods": "58"}
    )
    shortage: bool = False  # when set, provision() leaves placeholders Unschedulable
    graceful: bool = False  # when set, terminate() evicts Pods gracefully and waits them out
    evictions: list[tuple[str, int]] = field(default_factory=list)  # (Pod, HTTP status) tried
    forced: list[str] = field(default_factory=list)  # claims a Pod of which was force-deleted
    held: list[str] = field(default_factory=list)  # Pods whose do-not-disrupt held the drain
    _serial: int = 0

    def node(
        self,
        pool: str,
        *,
        created: datetime | None = None,
        expire_after: str | None = "336h",
        tgp: str | None = "1h",
        ready: bool = True,
        zone: str | None = None,
    ) -> tuple[str, str]:
        """Seed one NodeClaim and its Node in ``pool``; return (claim name, node name)."""
        self._serial += 1
        claim, node = f"{pool}-{self._serial:05x}", f"ip-10-0-0-{self._serial}.ec2.internal"
        labels = self._labels(pool, node, zone or self.zone)
        meta: Obj = {"name": claim, "labels": dict(labels), "finalizers": [TERMINATION_FINALIZER]}
        if created is not None:
            meta["creationTimestamp"] = rfc3339(created)
        spec: Obj = {
            "nodeClassRef": {"group": "eks.amazonaws.com", "kind": "NodeClass", "name": "default"},
            "requirements": [
                {"key": POOL_LABEL, "operator": "In", "values": [pool]},
                {
                    "key": "topology.kubernetes.io/zone",
                    "operator": "In",
                    "values": [labels["topology.kubernetes.io/zone"]],
                },
            ],
            "expireAfter": expire_after if expire_after is not None else "Never",
        }
        if tgp is not None:
            spec["terminationGracePeriod"] = tgp
        self.api.seed(
            {
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodeClaim",
                "metadata": meta,
                "spec": spec,
                "status": {
                    "nodeName": node,
                    "providerID": f"aws:///{self.zone}/i-{self._serial:017x}",
                    "allocatable": dict(self.allocatable),
                    "capacity": dict(self.allocatable),
                    "conditions": [_condition("Ready", ready)],
                },
            }
        )
        node_meta: Obj = {"name": node, "labels": labels}
        if created is not None:
            node_meta["creationTimestamp"] = rfc3339(created)
        self.api.seed(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": node_meta,
                "spec": {"providerID": f"aws:///{self.zone}/i-{self._serial:017x}"},
                "status": {
                    "allocatable": dict(self.allocatable),
                    "conditions": [_condition("Ready", ready)],
                },
            }
        )
        return claim, node

    def pod(
        self,
        name: str,
        node: str,
        requests: dict[str, str],
        *,
        namespace: str = "apps",
        daemonset: bool = False,
        annotations: dict[str, str] | None = None,
        labels: dict[str, str] | None = None,
    ) -> None:
        """Seed a Running, Ready workload (or DaemonSet) Pod bound to ``node``."""
        meta: Obj = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
        if annotations:
            meta["annotations"] = dict(annotations)
        if daemonset:
            meta["ownerReferences"] = [
                {
                    "apiVersion": "apps/v1",
                    "kind": "DaemonSet",
                    "name": name,
                    "uid": "ds-" + name,
                    "controller": True,
                }
            ]
        self.api.seed(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": meta,
                "spec": {
                    "nodeName": node,
                    "containers": [
                        {"name": "app", "image": "app:1", "resources": {"requests": requests}}
                    ],
                },
                "status": {
                    "phase": "Running",
                    "conditions": [_condition("PodScheduled", True), _condition("Ready", True)],
                },
            }
        )

    def provision(self) -> list[str]:
        """Launch capacity for every pending Pod pinned to a NodePool; return the new claims."""
        launched = []
        for pod in self.api.list("Pod"):
            if pod["spec"].get("nodeName") or pod["metadata"].get("deletionTimestamp"):
                continue
            wanted = _required_in_values(pod)
            pool = (wanted.get(POOL_LABEL) or [None])[0]
            if pool is None or self.api.get("NodePool", pool) is None:
                continue
            ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
            if self.shortage:
                self.api.modify("Pod", name, _unschedulable, namespace=ns)
                continue
            tmpl = self.api.get("NodePool", pool)["spec"]["template"]["spec"]  # type: ignore[index]
            zone = (wanted.get("topology.kubernetes.io/zone") or [self.zone])[0]
            claim, node = self.node(
                pool,
                expire_after=tmpl.get("expireAfter"),
                tgp=tmpl.get("terminationGracePeriod"),
                zone=zone,
            )
            self.api.modify("Pod", name, lambda p, n=node: _bind(p, n), namespace=ns)
            launched.append(claim)
        return launched

    def terminate(self) -> list[str]:
        """Drain every NodeClaim being deleted, as Karpenter's terminator does (see the module
        docstring); return the claims that went (each with its Node and its Pods).

        DaemonSet Pods tolerate Karpenter's disruption taint, so the drain leaves them to go
        with the Node. Evictions use grace 0 unless ``graceful`` (then the Pod terminates for
        its own grace period and the node waits for it). A Pod a PodDisruptionBudget holds
        (429, or 500 under two budgets) or whose do-not-disrupt is active is tried again on a
        later call, until its force-deletion time.
        """
        gone = []
        self.api.reap()
        for claim in self.api.list("NodeClaim"):
            if not claim["metadata"].get("deletionTimestamp"):
                continue
            name = claim["metadata"]["name"]
            deadline = self._termination_time(claim)
            node = claim.get("status", {}).get("nodeName")
            for pod in self._waiting(node):
                self._drain(name, pod, deadline)
            self.api.reap()
            if self._waiting(node):
                continue  # Karpenter requeues the drain
            for pod in self.api.list("Pod"):
                if node and pod["spec"].get("nodeName") == node:
                    self.api.remove("Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])
            if node and self.api.get("Node", node) is not None:
                self.api.remove("Node", node)
            self.api.remove("NodeClaim", name)
            gone.append(name)
        return gone

    def _termination_time(self, claim: Obj) -> datetime | None:
        """The claim's drain deadline, written on it first as Karpenter's lifecycle controller
        writes it (deletion + terminationGracePeriod; None without one)."""
        written = (claim["metadata"].get("annotations") or {}).get(TERMINATION_TIMESTAMP)
        if written is None:
            deadline = _deadline(claim)
            if deadline is None:
                return None
            written = rfc3339(deadline)
            self.api.modify(
                "NodeClaim",
                claim["metadata"]["name"],
                lambda c: (
                    c["metadata"]
                    .setdefault("annotations", {})
                    .update({TERMINATION_TIMESTAMP: written})
                ),
            )
        return parse_time(written, TERMINATION_TIMESTAMP)

    def _waiting(self, node: str | None) -> list[Obj]:
        """The Pods the drain of ``node`` waits for (``IsWaitingEviction``): not terminal, not
        a DaemonSet's, not terminating for over a minute past their deletion."""
        now = self.api.now()
        return [
            p
            for p in self.api.list("Pod")
            if node
            and p["spec"].get("nodeName") == node
            and not _daemonset(p)
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            and not (
                p["metadata"].get("deletionTimestamp")
                and now - _when(p["metadata"]["deletionTimestamp"]) > STUCK_TERMINATING
            )
        ]

    def _drain(self, claim: str, pod: Obj, deadline: datetime | None) -> None:
        """One reconcile of Karpenter's eviction queue for ``pod``: force-delete, wait, hold or
        evict."""
        meta, now = pod["metadata"], self.api.now()
        if _needs_force_delete(pod, deadline, now):
            assert deadline is not None
            grace = max(int((deadline - now).total_seconds()), 1)
            options = {"gracePeriodSeconds": grace, "preconditions": {"uid": meta["uid"]}}
            self.api.delete("Pod", meta["name"], meta["namespace"], options)
            if claim not in self.forced:
                self.forced.append(claim)
            return
        if meta.get("deletionTimestamp"):
            return  # terminating: the drain waits for it
        if pod_opt_out_active(pod_view(pod), now):
            if meta["name"] not in self.held:
                self.held.append(meta["name"])
            return  # do-not-disrupt: Karpenter does not evict it, only forces it at the end
        self._evicted(pod)

    def _evicted(self, pod: Obj) -> bool:
        """Evict ``pod`` through the Eviction API; False when a budget holds it (429, or 500
        under two budgets), as Karpenter's queue retries it."""
        meta = pod["metadata"]
        options: Obj = {"preconditions": {"uid": meta["uid"]}}
        if not self.graceful:
            options["gracePeriodSeconds"] = 0
        eviction = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            # controller-runtime names the Eviction after the Pod it creates it for.
            "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
            "deleteOptions": options,
        }
        try:
            self.api.evict(meta["namespace"], meta["name"], eviction)
        except KubeError as refused:
            if refused.code not in (429, 500):
                raise
            self.evictions.append((meta["name"], refused.code))
            return False
        self.evictions.append((meta["name"], 201))
        return True

    def disrupt(self, claim: str, reason: str = "Underutilized") -> str:
        """Karpenter decides to replace ``claim`` itself: it taints the node
        ``karpenter.sh/disrupted:NoSchedule``, sets ``DisruptionReason`` and launches the
        replacement; return the replacement claim (``finish_disruption`` deletes the old one)."""
        obj = self.api.get("NodeClaim", claim)
        assert obj is not None
        pool, node = obj["metadata"]["labels"][POOL_LABEL], obj["status"]["nodeName"]
        self.api.modify(
            "Node",
            node,
            lambda n: (
                n["spec"]
                .setdefault("taints", [])
                .append({"key": "karpenter.sh/disrupted", "effect": "NoSchedule"})
            ),
        )
        self.api.modify(
            "NodeClaim",
            claim,
            lambda c: c["status"]["conditions"].append(
                _condition("DisruptionReason", True, reason)
            ),
        )
        replacement, _ = self.node(pool)
        return replacement

    def finish_disruption(self, claim: str) -> None:
        """Karpenter's replacement is up: it deletes the disrupted claim (the drain follows)."""
        self.api.delete("NodeClaim", claim)

    def recount(self, pool: str) -> None:
        """Karpenter's NodePool counter: write ``status.resources`` and ``status.nodes`` through
        the status path (every write bumps the pool's resourceVersion, as a real one does)."""
        claims = [
            c for c in self.api.list("NodeClaim") if c["metadata"]["labels"].get(POOL_LABEL) == pool
        ]
        cpu = sum(parse_quantity_units(c["status"]["allocatable"].get("cpu", "0")) for c in claims)
        status = {"resources": {"cpu": f"{cpu}m", "nodes": str(len(claims))}, "nodes": len(claims)}
        self.api.modify("NodePool", pool, lambda p: p.setdefault("status", {}).update(status))

    async def count_forever(self, pool: str, every: float) -> None:
        """Run ``recount`` every ``every`` seconds until cancelled: a background status writer."""
        while True:
            self.recount(pool)
            await asyncio.sleep(every)

    def recount_after_reads(self, pool: str, nth: int) -> None:
        """Also recount right after every ``nth`` read of the NodePool, so the reader's next
        conditional write meets a 409 for certain (the counter reconciled in between)."""
        path = f"/apis/karpenter.sh/v1/nodepools/{pool}"
        reads = 0

        def after(request: Request) -> None:
            nonlocal reads
            if request.method == "GET" and request.path == path:
                reads += 1
                if reads % nth == 0:
                    self.recount(pool)

        self.api.after_request.append(after)

    def _labels(self, pool: str, node: str, zone: str) -> dict[str, str]:
        return {
            POOL_LABEL: pool,
            "kubernetes.io/hostname": node,
            "topology.kubernetes.io/zone": zone,
            "kubernetes.io/arch": self.arch,
            "karpenter.sh/capacity-type": self.capacity_type,
            "node.kubernetes.io/instance-type": "m6i.xlarge",
        }


def _condition(kind: str, ok: bool, reason: str = "", message: str = "") -> Obj:
    return {
        "type": kind,
        "status": "True" if ok else "False",
        "reason": reason or (kind if ok else f"Not{kind}"),
        "message": message,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


def _required_in_values(pod: Obj) -> dict[str, list[str]]:
    """Key -> values of the ``In`` expressions of the Pod's first required affinity term."""
    terms = (
        pod["spec"]
        .get("affinity", {})
        .get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {})
        .get("nodeSelectorTerms", [])
    )
    if not terms:
        return {}
    return {
        e["key"]: list(e.get("values", []))
        for e in terms[0].get("matchExpressions", [])
        if e.get("operator") == "In"
    }


def _daemonset(pod: Obj) -> bool:
    return any(o.get("kind") == "DaemonSet" for o in pod["metadata"].get("ownerReferences") or ())


def _deadline(claim: Obj) -> datetime | None:
    """When Karpenter stops waiting for the claim's drain: deletion + terminationGracePeriod."""
    tgp = (claim.get("spec") or {}).get("terminationGracePeriod")
    if not tgp:
        return None
    return _when(claim["metadata"]["deletionTimestamp"]) + parse_duration(tgp)


def _when(stamp: str) -> datetime:
    at = parse_time(stamp, "timestamp")
    assert at is not None
    return at


def _needs_force_delete(pod: Obj, deadline: datetime | None, now: datetime) -> bool:
    """Karpenter's ``needsForceDelete``: a terminating Pod whose deletion ends past the
    deadline, or one whose own grace period would run past it from now."""
    if deadline is None:
        return False
    deleting = pod["metadata"].get("deletionTimestamp")
    if deleting:
        return _when(deleting) > deadline
    grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    if grace is None:
        return False
    return now > deadline - timedelta(seconds=int(grace))


def _bind(pod: Any, node: str) -> None:
    pod["spec"]["nodeName"] = node
    pod["status"] = {
        "phase": "Running",
        "conditions": [_condition("PodScheduled", True), _condition("Ready", True)],
    }


def _unschedulable(pod: Any) -> None:
    pod["status"] = {
        "phase": "Pending",
        "conditions": [
            _condition(
                "PodScheduled",
                False,
                "Unschedulable",
                "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity.",
            )
        ],
    }
