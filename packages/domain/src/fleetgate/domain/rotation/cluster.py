"""What the rotation controller sees of a cluster, and what it asks of it: plain values.

A ``ClusterGateway`` (``fleetgate.domain.ports``) turns one NodePool and everything hanging off it
into a ``PoolObservation``; the machine reads only these values. The Karpenter gateway builds them
from ``karpenter.sh/v1`` objects, the fake cluster from its in-memory state.

Resource quantities are integers in milli-units, like Kubernetes' ``Quantity.MilliValue()``:
``cpu: "500m"`` is 500, ``memory: "1Ki"`` is 1_024_000. The machine only adds and compares them.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import cached_property
from operator import attrgetter
from typing import TypeVar

from fleetgate.domain.rotation.selection import ClaimView

_name = attrgetter("name")
_node_name = attrgetter("node_name")

Resources = Mapping[str, int]
"""Resource name -> quantity in milli-units (see the module docstring)."""


class ClusterConflict(Exception):
    """A conditional write lost a race: the object changed since it was read. Requeue and retry."""


class ObjectNotFound(LookupError):
    """The object a write addressed does not exist (any more). Requeue; the next pass sees it."""


@dataclass(frozen=True)
class Requirement:
    """One node-selector requirement (``key``, ``operator``, ``values``) as Kubernetes spells it.

    ``operator`` is one of In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte.
    """

    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class Taint:
    """A NodePool template taint; the placeholder tolerates each one (``Equal``)."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True)
class NodeClaimView:
    """One ``karpenter.sh/v1`` NodeClaim of the pool.

    ``expire_after`` None means ``Never`` (an absent field is the CRD default, 720h, applied
    by the API server; gateways apply it too). ``termination_grace_period`` None means unset.
    ``deleting_at`` is the deletionTimestamp (None while not being deleted). ``ready`` is the
    Ready condition being exactly True. ``node_name`` is ``status.nodeName`` (None until bound).
    ``disruption_reason`` is the reason of a True ``DisruptionReason`` condition (Karpenter has
    decided to replace the claim), ``drifted`` a True ``Drifted`` condition.
    """

    name: str
    created_at: datetime
    expire_after: timedelta | None
    termination_grace_period: timedelta | None = None
    ready: bool = False
    node_name: str | None = None
    deleting_at: datetime | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    requirements: tuple[Requirement, ...] = ()
    allocatable: Resources = field(default_factory=dict)
    disruption_reason: str | None = None
    drifted: bool = False

    @property
    def deleting(self) -> bool:
        """True once Kubernetes has set the deletionTimestamp."""
        return self.deleting_at is not None

    @cached_property
    def selection_view(self) -> ClaimView:
        """What selection reads of this claim; built once per value, since a gateway that
        caches its observation hands the same value to pass after pass."""
        return ClaimView(
            name=self.name,
            created_at=self.created_at,
            expire_after=self.expire_after,
            tgp=self.termination_grace_period,
            deleting=self.deleting_at is not None,
            ready=self.ready,
            node_name=self.node_name,
            annotations=self.annotations,
            disruption_reason=self.disruption_reason,
            drifted=self.drifted,
        )


@dataclass(frozen=True)
class NodeView:
    """One Node labelled with the pool. ``unschedulable`` is ``spec.unschedulable``; ``taints``
    are ``spec.taints`` (Karpenter's ``karpenter.sh/disrupted`` among them)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    ready: bool = False
    allocatable: Resources = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()


@dataclass(frozen=True)
class PodView:
    """A Pod on one of the pool's nodes, or one of the controller's placeholders.

    ``owner_kind`` is the controlling owner's kind (``DaemonSet`` matters); ``mirror`` marks a
    static pod's mirror; ``phase`` is Pending/Running/Succeeded/Failed. ``unschedulable_reason``
    and ``unschedulable_message`` carry a ``PodScheduled=False`` condition, if any.
    ``node_selector`` and ``required_hostnames`` (one tuple per required node-affinity term: the
    hostnames its ``kubernetes.io/hostname In`` allows, empty when the term has none) let the
    domain tell a node-pinned Pod from a movable one. ``started_at`` is ``status.startTime``
    (a duration-valued ``karpenter.sh/do-not-disrupt`` counts from it).
    """

    namespace: str
    name: str
    node_name: str | None = None
    phase: str = "Pending"
    deleting: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    requests: Resources = field(default_factory=dict)
    owner_kind: str | None = None
    mirror: bool = False
    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_hostnames: tuple[tuple[str, ...], ...] = ()
    unschedulable_reason: str | None = None
    unschedulable_message: str | None = None
    started_at: datetime | None = None


@dataclass(frozen=True)
class MemberChanges:
    """Which member values one observation has that the one before it had not (``added``,
    new and rebuilt ones) and which it lost (``gone``), for claims, nodes and Pods; ``since``
    is the earlier observation's ``serial``. A gateway that keeps its members by change (an
    informer cache, the fake cluster) knows them; handed over, they spare a reader the
    comparison of every member of both observations. None from a gateway that does not."""

    since: int
    claims_added: tuple[NodeClaimView, ...] = ()
    claims_gone: tuple[NodeClaimView, ...] = ()
    nodes_added: tuple[NodeView, ...] = ()
    nodes_gone: tuple[NodeView, ...] = ()
    pods_added: tuple[PodView, ...] = ()
    pods_gone: tuple[PodView, ...] = ()


@dataclass(frozen=True)
class PoolObservation:
    """Everything one pass over one NodePool needs, read at (nearly) one instant.

    ``version`` is the NodePool's resourceVersion: the anchor write is conditional on it.
    ``expire_after`` / ``termination_grace_period`` come from ``spec.template.spec`` (None =
    Never / unset). ``claims`` are the NodeClaims labelled with the pool, ``nodes`` the Nodes
    labelled with it, ``pods`` the Pods bound to those nodes, ``placeholders`` the controller's
    placeholder Pods for this pool (bound or not). ``limits`` is ``spec.limits`` and
    ``resources`` is ``status.resources`` (its ``nodes`` entry counts nodes, in milli-units like
    every quantity). ``replicas`` is ``spec.replicas`` (set: a static NodePool, where Karpenter
    does not provision for pending pods, so a surge cannot work); ``ready`` is the NodePool's
    Ready condition being True (Karpenter does not provision from a pool that is not Ready).
    """

    name: str
    version: str
    expire_after: timedelta | None
    termination_grace_period: timedelta | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    requirements: tuple[Requirement, ...] = ()
    taints: tuple[Taint, ...] = ()
    limits: Resources = field(default_factory=dict)
    resources: Resources = field(default_factory=dict)
    claims: tuple[NodeClaimView, ...] = ()
    nodes: tuple[NodeView, ...] = ()
    pods: tuple[PodView, ...] = ()
    placeholders: tuple[PodView, ...] = ()
    replicas: int | None = None
    ready: bool = True
    serial: int | None = field(default=None, compare=False)
    """The gateway's number for this observation value (None: it numbers none)."""
    changes: MemberChanges | None = field(default=None, compare=False, repr=False)
    """The member changes since the gateway's observation ``changes.since`` (None: unknown)."""

    @property
    def static(self) -> bool:
        """A static NodePool (``spec.replicas`` set): break before make, never a surge."""
        return self.replicas is not None

    def claim(self, name: str) -> NodeClaimView | None:
        """The pool claim called ``name``, if it exists."""
        return self._claims_by_name.get(name)

    def node(self, name: str | None) -> NodeView | None:
        """The pool node called ``name``, if it exists."""
        if name is None:
            return None
        return self._nodes_by_name.get(name)

    def claim_on(self, node: str) -> NodeClaimView | None:
        """The first pool claim (in observation order) bound to ``node``, if any."""
        return self._claims_by_node.get(node)

    # Indexes built once per observation value (in C): a pass looks claims up several times,
    # and a walk of a 10,000-claim tuple per look-up is most of a pass.
    @cached_property
    def _claims_by_name(self) -> dict[str, NodeClaimView]:
        # Reversed, so that of two claims with one name the first wins, as a walk would find.
        return dict(zip(map(_name, reversed(self.claims)), reversed(self.claims), strict=True))

    @cached_property
    def _nodes_by_name(self) -> dict[str, NodeView]:
        return dict(zip(map(_name, reversed(self.nodes)), reversed(self.nodes), strict=True))

    @cached_property
    def _claims_by_node(self) -> dict[str, NodeClaimView]:
        bound = [c for c in reversed(self.claims) if c.node_name is not None]
        self.__dict__["_bound_claims"] = len(bound)  # two on one node: fewer entries than this
        return dict(zip(map(_node_name, bound), bound, strict=True))

    def with_changes(
        self,
        annotations: Mapping[str, str],
        claims: Mapping[str, NodeClaimView],
        nodes: Mapping[str, NodeView],
    ) -> PoolObservation:
        """This observation with the pool's annotations replaced and the named claims and
        nodes (the first of each name, as the look-ups find) replaced by new values of the same
        name, node binding and place. Its indexes are this one's with those entries in front,
        not a rebuild from every member."""
        changed = replace(
            self,
            serial=None,
            changes=None,
            annotations=annotations,
            claims=_substituted(self.claims, claims, self.claim),
            nodes=_substituted(self.nodes, nodes, self.node),
        )
        # The cached properties' slots, filled with the changed entries in front of this
        # observation's indexes (they are only ever read with ``get``).
        changed.__dict__.update(
            _claims_by_name=ChainMap(dict(claims), self._claims_by_name),
            _nodes_by_name=ChainMap(dict(nodes), self._nodes_by_name),
        )
        if "_claims_by_node" in self.__dict__:  # built already; else built when first asked
            by_node: dict[str, NodeClaimView] = {}
            for claim in claims.values():
                if claim.node_name is not None and self.claim_on(claim.node_name) is self.claim(
                    claim.name
                ):
                    by_node[claim.node_name] = claim
            changed.__dict__["_claims_by_node"] = ChainMap(by_node, self._claims_by_node)
        return changed

    def inherit_indexes(self, previous: PoolObservation) -> None:
        """Take the look-up indexes ``previous`` has built, brought up to ``changes``, when
        this observation carries the changes since it: a dict copy in C and a few edits
        instead of a walk of every member. An index a duplicate name would make ambiguous is
        left to be built as usual."""
        changes = self.changes
        if changes is None or previous.serial is None or changes.since != previous.serial:
            return
        built = previous.__dict__
        mine = self.__dict__
        bound = built.get("_bound_claims", -1)
        bound += sum(c.node_name is not None for c in changes.claims_added)
        bound -= sum(c.node_name is not None for c in changes.claims_gone)
        for slot, gone, added, key, size in (
            ("_claims_by_name", changes.claims_gone, changes.claims_added, _name, self.claims),
            ("_nodes_by_name", changes.nodes_gone, changes.nodes_added, _name, self.nodes),
            ("_claims_by_node", changes.claims_gone, changes.claims_added, _node_name, None),
        ):
            if slot not in built or slot in mine:
                continue
            # An index that held every member, and no more, can be carried on.
            expected = len(size) if size is not None else bound
            index = dict(built[slot])
            for value in gone:
                k = key(value)
                if k is not None and index.get(k) is value:
                    del index[k]
            clash = False
            for value in added:
                k = key(value)
                if k is None:
                    continue
                if k in index:
                    clash = True
                    break
                index[k] = value
            if not clash and len(index) == expected:
                mine[slot] = index  # the cached property's slot, as its first use fills it
                if size is None:
                    mine["_bound_claims"] = bound

    def pods_on(self, node: str) -> tuple[PodView, ...]:
        """The non-placeholder Pods bound to ``node``."""
        # A filter in one pass is far cheaper than building a per-node index in Python, and
        # a pass asks about a node or two.
        return tuple(p for p in self.pods if p.node_name == node)


_V = TypeVar("_V", NodeClaimView, NodeView)


def _substituted(
    values: tuple[_V, ...], by_name: Mapping[str, _V], lookup: Callable[[str], _V | None]
) -> tuple[_V, ...]:
    """``values`` with each named one (the first of its name, as ``lookup`` finds) replaced."""
    if not by_name:
        return values
    out = list(values)
    ids = list(map(id, values))  # positions by identity, in C (no dataclass comparisons)
    for name, value in by_name.items():
        original = lookup(name)
        if original is not None:
            out[ids.index(id(original))] = value
    return tuple(out)


@dataclass(frozen=True)
class PlaceholderSpec:
    """The placeholder Pod to create: a negative-priority ``pause`` Pod sized like the candidate.

    ``required`` becomes required node affinity (the pool label plus the matched requirement
    keys); ``avoid_hosts`` becomes the weight-100 preferred ``kubernetes.io/hostname NotIn``
    term; ``preferred`` the weight-1 terms. ``labels`` / ``annotations`` carry the markers
    (``fleetgate.io/surge-for``, ``karpenter.sh/nodepool``, ``karpenter.sh/do-not-disrupt``).
    ``tolerations`` are the pool template's taints. ``priority_class`` and ``image`` are filled
    by the controller from its settings (empty: the gateway's own defaults).
    """

    namespace: str
    name: str
    pool: str
    surge_for: str
    requests: Resources = field(default_factory=dict)
    required: tuple[Requirement, ...] = ()
    preferred: tuple[Requirement, ...] = ()
    avoid_hosts: tuple[str, ...] = ()
    tolerations: tuple[Taint, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    priority_class: str = ""
    image: str = ""
