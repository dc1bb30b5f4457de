"""Karpenter's reactions, played against the local API server (test support).

Karpenter is not running here, so a test calls these steps where Karpenter would act: seed a
pool with NodeClaims and Nodes, ``provision()`` capacity for pending placeholder Pods (a new
NodeClaim + Node that is Ready, and the Pod bound and Running), and ``terminate()`` NodeClaims
whose deletion was requested (the drain ends: the claim's finalizer is lifted, the Node and its
Pods go). Objects look like karpenter.sh/v1 objects on EKS so the gateway parses real shapes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tests.adapters.karpenter.kubeapi import KubeAPIServer, Obj, rfc3339

POOL_LABEL = "karpenter.sh/nodepool"
TERMINATION_FINALIZER = "karpenter.sh/termination"


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
    ) -> None:
        """Seed a Running workload (or DaemonSet) Pod bound to ``node``."""
        meta: Obj = {"name": name, "namespace": namespace}
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
                "status": {"phase": "Running"},
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
        """End the drain of every NodeClaim being deleted: it, its Node and its Pods go."""
        gone = []
        for claim in self.api.list("NodeClaim"):
            if not claim["metadata"].get("deletionTimestamp"):
                continue
            node = claim.get("status", {}).get("nodeName")
            for pod in self.api.list("Pod"):
                if node and pod["spec"].get("nodeName") == node:
                    self.api.remove("Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])
            if node and self.api.get("Node", node) is not None:
                self.api.remove("Node", node)
            self.api.remove("NodeClaim", claim["metadata"]["name"])
            gone.append(claim["metadata"]["name"])
        return gone

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
