"""The fake cluster's mutable records, and their conversion into the domain's observation values.

A record caches its observation value and drops it on any write to one of its attributes (an
in-place change of one of its dicts calls ``touch()``), and tells the cluster's ``Revisions``
that something changed: an unchanged pool is then observed by reusing values, like an informer
cache keyed by resourceVersion, instead of copying every object on every pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any, ClassVar

from fleetgate.domain.rotation.budgets import DEFAULT_BUDGETS, Budget
from fleetgate.domain.rotation.cluster import (
    NodeClaimView,
    NodeView,
    PodView,
    Requirement,
    Resources,
    Taint,
)

NODEPOOL_LABEL = "karpenter.sh/nodepool"
HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONE_LABEL = "topology.kubernetes.io/zone"
ARCH_LABEL = "kubernetes.io/arch"
CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"

DEFAULT_NODE_ALLOCATABLE: dict[str, int] = {
    "cpu": 4_000,
    "memory": 16 * 2**30 * 1_000,
    "pods": 110_000,
}


class Revisions:
    """Counters the cluster's records bump when they change: ``any`` on every change; ``claims``,
    ``pods`` (workload Pods) and ``placeholders`` when one joins, leaves or (for the first two)
    moves: a pool's member lists are rebuilt only when their own counter moved."""

    __slots__ = ("any", "claims", "dirty", "on_claim", "on_pod", "placeholders", "pods")

    def __init__(self) -> None:
        self.any = 0
        self.claims = 0
        self.pods = 0
        self.placeholders = 0
        self.dirty: dict[int, Any] = {}
        """The records changed since the cluster last collected them (by ``id``): an
        observation rebuilds only their values."""
        self.on_pod: Any = None
        """Called as ``on_pod(pod, attribute, old_value)`` after a write changed one of the
        attributes the cluster's Pods are indexed by (``POD_INDEXED``): the ``PodTable``
        keeps itself current this way."""
        self.on_claim: Any = None
        """Called as ``on_claim(claim, attribute, old_value)`` after a write changed one of
        ``CLAIM_INDEXED``: the ``ClaimTable`` keeps itself current this way."""

    def left(self, kind: str, record: Any = None) -> None:
        """A record of ``kind`` (``claims``, ``pods``, ``placeholders``) joined or left."""
        self.any += 1
        setattr(self, kind, getattr(self, kind) + 1)
        if record is not None:
            self.dirty[id(record)] = record


POD_INDEXED = frozenset({"node_name", "nominated_claim", "pool", "priority", "owner_kind"})
"""The Pod attributes the cluster's Pod indexes depend on (see ``tables.PodTable``)."""
CLAIM_INDEXED = frozenset({"ready", "deleting_at", "pool"})
"""The claim attributes the cluster's claim indexes depend on (see ``tables.ClaimTable``)."""


class _Cached:
    """A record whose observation value is cached until one of its attributes is written."""

    _view: Any = None
    _revisions: Revisions | None = None
    _membership: frozenset[str] = frozenset()
    """Attributes whose change moves the record between member lists (see ``_kind``)."""
    _unobserved: frozenset[str] = frozenset({"_view"})
    """Attributes no observation shows: writing one leaves the cached value and the pool's
    observation as they are."""

    _indexed: frozenset[str] = frozenset()
    """Attributes a cluster index depends on: a write that changes one is reported."""
    _index_hook = ""
    """The ``Revisions`` attribute that is told, as ``hook(record, attribute, old_value)``."""

    def __setattr__(self, name: str, value: Any) -> None:
        revisions = self._revisions
        if revisions is None:
            # Not on a cluster yet (its dataclass ``__init__`` writes every field): no index,
            # member list or observation knows it, so there is no one to tell.
            object.__setattr__(self, name, value)
            if name not in self._unobserved:
                object.__setattr__(self, "_view", None)
            return
        if name in self._indexed:
            hook = getattr(revisions, self._index_hook)
            if hook is not None:
                old = getattr(self, name)
                self._write(name, value)
                if old != value:
                    hook(self, name, old)
                return
        self._write(name, value)

    def _write(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name not in self._unobserved:
            object.__setattr__(self, "_view", None)
            revisions = self._revisions
            if revisions is not None:
                revisions.any += 1
                revisions.dirty[id(self)] = self
                if name in self._membership:
                    kind = self._kind()
                    if kind == "claims":
                        revisions.claims += 1
                    elif kind == "pods":
                        revisions.pods += 1

    def _kind(self) -> str | None:
        """The member list this record is counted in (None: none)."""
        return None

    def attach(self, revisions: Revisions) -> None:
        """Report this record's changes to ``revisions`` (the owning cluster's)."""
        object.__setattr__(self, "_revisions", revisions)
        kind = self._kind()
        revisions.dirty[id(self)] = self
        if kind is None:
            revisions.any += 1
        else:
            revisions.left(kind)

    def touch(self) -> None:
        """One of the record's dicts was changed in place: its cached value is stale."""
        self._view = None
        if self._revisions is not None:
            self._revisions.any += 1
            self._revisions.dirty[id(self)] = self


@dataclass
class Pool(_Cached):
    """A NodePool: template, limits, annotations, and the fake-Karpenter knobs for its nodes."""

    name: str
    expire_after: timedelta | None
    termination_grace_period: timedelta | None
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    requirements: tuple[Requirement, ...] = ()
    taints: tuple[Taint, ...] = ()
    limits: dict[str, int] = field(default_factory=dict)
    node_allocatable: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_NODE_ALLOCATABLE))
    node_labels: dict[str, str] = field(default_factory=dict)
    provisioning_delay: timedelta = timedelta(minutes=2)  # Pod Pending -> claim Ready
    drain_time: timedelta = timedelta(minutes=5)
    version: int = 1
    replicas: int | None = None  # spec.replicas: a static NodePool
    ready: bool = True  # the NodePool's Ready condition
    budgets: tuple[Budget, ...] = DEFAULT_BUDGETS  # spec.disruption.budgets (the CRD default)


@dataclass
class Claim(_Cached):
    """A NodeClaim and, once launched, its Node (the two share a name here, as on AWS)."""

    name: str
    pool: str
    created_at: datetime
    expire_after: timedelta | None
    termination_grace_period: timedelta | None
    allocatable: dict[str, int]
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    ready: bool = False
    deleting_at: datetime | None = None
    node: Node | None = None
    disruption_reason: str | None = None  # Karpenter's DisruptionReason condition
    drifted: bool = False  # Karpenter's Drifted condition

    _membership = frozenset({"node"})
    _labels_seen: ClassVar[Any] = None
    """(the labels' items, their observed mapping, the requirements) at the last build."""

    _indexed = CLAIM_INDEXED
    _index_hook = "on_claim"

    def _kind(self) -> str:
        return "claims"

    def view(self) -> NodeClaimView:
        """The claim as the controller observes it (cached until the claim changes)."""
        if self._view is None:
            self._view = self._build()
        view: NodeClaimView = self._view
        return view

    def _build(self) -> NodeClaimView:
        labels, requirements = self._labels()
        return NodeClaimView(
            name=self.name,
            created_at=self.created_at,
            expire_after=self.expire_after,
            termination_grace_period=self.termination_grace_period,
            ready=self.ready,
            node_name=self.node.name if self.node else None,
            deleting_at=self.deleting_at,
            annotations=MappingProxyType(dict(self.annotations)),
            labels=labels,
            requirements=requirements,
            allocatable=MappingProxyType(dict(self.allocatable)),
            disruption_reason=self.disruption_reason,
            drifted=self.drifted,
        )

    def _labels(self) -> tuple[MappingProxyType[str, str], tuple[Requirement, ...]]:
        # A claim's labels almost never change while its annotations change every rotation
        # step: the last build's labels and requirements serve while the items are the same.
        items = tuple(self.labels.items())
        seen = self._labels_seen
        if seen is None or seen[0] != items:
            requirements = tuple(
                Requirement(key, "In", (value,))
                for key, value in sorted(items)
                if key != NODEPOOL_LABEL
            )
            seen = (items, MappingProxyType(dict(items)), requirements)
            object.__setattr__(self, "_labels_seen", seen)
        return seen[1], seen[2]


@dataclass
class Node(_Cached):
    """A Node of a launched claim."""

    name: str
    pool: str
    labels: dict[str, str]
    allocatable: dict[str, int]
    annotations: dict[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    ready: bool = True
    taints: tuple[Taint, ...] = ()

    def view(self) -> NodeView:
        """The node as the controller observes it (cached until the node changes)."""
        if self._view is None:
            self._view = self._build()
        view: NodeView = self._view
        return view

    def _build(self) -> NodeView:
        return NodeView(
            name=self.name,
            labels=MappingProxyType(dict(self.labels)),
            annotations=MappingProxyType(dict(self.annotations)),
            unschedulable=self.unschedulable,
            ready=self.ready,
            allocatable=MappingProxyType(dict(self.allocatable)),
            taints=self.taints,
        )


@dataclass
class Pod(_Cached):
    """A Pod. ``pool`` is its required NodePool affinity (None: any); ``seq`` orders creation."""

    namespace: str
    name: str
    seq: int
    requests: dict[str, int] = field(default_factory=dict)
    pool: str | None = None
    priority: int = 0
    owner_kind: str | None = None
    node_name: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    avoid_hosts: tuple[str, ...] = ()
    required: tuple[Requirement, ...] = ()
    nominated_claim: str | None = None
    unschedulable_message: str | None = None
    pending_since: datetime | None = None
    started_at: datetime | None = None  # status.startTime (a duration opt-out counts from it)
    #: spec.terminationGracePeriodSeconds (the API server's default): Karpenter force-deletes a
    #: Pod it may not evict this long before its node's drain deadline.
    termination_grace_period: timedelta = timedelta(seconds=30)

    @property
    def key(self) -> tuple[str, str]:
        """(namespace, name): a Pod's identity."""
        return (self.namespace, self.name)

    # A placeholder is listed by its pool whether bound or not: binding it moves nothing.
    _membership = frozenset({"node_name"})
    # The scheduler's own bookkeeping (a PodView has neither): Karpenter's batching and
    # nomination of Pending Pods rewrite these on every scheduling round.
    _unobserved = frozenset({"_view", "nominated_claim", "pending_since"})

    _indexed = POD_INDEXED
    _index_hook = "on_pod"

    def _kind(self) -> str:
        return "placeholders" if is_placeholder(self) else "pods"

    def view(self) -> PodView:
        """The pod as the controller observes it (cached until the pod changes)."""
        if self._view is None:
            self._view = self._build()
        view: PodView = self._view
        return view

    def _build(self) -> PodView:
        return PodView(
            namespace=self.namespace,
            name=self.name,
            node_name=self.node_name,
            phase="Running" if self.node_name else "Pending",
            labels=MappingProxyType(dict(self.labels)),
            annotations=MappingProxyType(dict(self.annotations)),
            requests=MappingProxyType(dict(self.requests)),
            owner_kind=self.owner_kind,
            unschedulable_reason="Unschedulable" if self.unschedulable_message else None,
            unschedulable_message=self.unschedulable_message,
            started_at=self.started_at,
        )


def fits(free: Resources, requests: Resources) -> bool:
    """True when every requested quantity fits into ``free`` (a resource a node lacks is 0)."""
    return all(want <= free.get(name, 0) for name, want in requests.items() if want > 0)


def fits_after(total: Resources, used: Sequence[Resources], requests: Resources) -> bool:
    """``fits(subtract(total, *used), requests)`` without building the free dict: the scheduler
    asks this of every candidate node, and only the requested resources matter."""
    for name, want in requests.items():
        if want <= 0:
            continue
        if name not in total:
            return False
        free = total[name]
        for item in used:
            free -= item.get(name, 0)
        if want > free:
            return False
    return True


def subtract(total: Resources, *used: Resources) -> dict[str, int]:
    """``total`` minus the sum of ``used``, per resource of ``total``."""
    out = dict(total)
    for item in used:
        for name, value in item.items():
            if name in out:
                out[name] -= value
    return out


def is_placeholder(pod: Pod) -> bool:
    """A bare negative-priority Pod: one of the controller's placeholders."""
    return pod.priority < 0 and pod.owner_kind is None


@dataclass(frozen=True)
class NodeChange:
    """A change of a Node that listeners hear about: ``ready``, ``removed``, ``cordoned``,
    ``uncordoned``."""

    kind: str
    node: str
    pool: str
    at: datetime


@dataclass(frozen=True)
class ClusterRecord:
    """One line of the cluster's history (for the simulator and for assertions in tests).

    Kinds: ``claim-created``, ``claim-ready``, ``claim-deleting``, ``claim-removed``,
    ``claim-expired`` (forced expiry started), ``placeholder-created``,
    ``placeholder-deleted``, ``placeholder-bound``, ``placeholder-preempted``, ``pod-bound``,
    ``static-replacement`` (a static pool launched a claim to keep its replicas),
    ``karpenter-disrupting`` (Karpenter started replacing a claim itself).
    """

    at: datetime
    kind: str
    name: str
    pool: str
    data: tuple[tuple[str, str], ...] = ()
