"""What the rotation controller sees of a cluster, and what it asks of it: plain values.

A ``ClusterGateway`` (``fleetgate.domain.ports``) turns one NodePool and everything hanging off it
into a ``PoolObservation``; the machine reads only these values. The Karpenter gateway builds them
from ``karpenter.sh/v1`` objects, the fake cluster from its in-memory state.

Resource quantities are integers in milli-units, like Kubernetes' ``Quantity.MilliValue()``:
``cpu: "500m"`` is 500, ``memory: "1Ki"`` is 1_024_000. The machine only adds and compares them.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import cached_property
from operator import attrgetter
from typing import Any, Generic, TypeVar

from fleetgate.domain.rotation.budgets import Budget
from fleetgate.domain.rotation.selection import ClaimView

_name = attrgetter("name")
_node_name = attrgetter("node_name")
_pod_key = attrgetter("namespace", "name")

_V = TypeVar("_V")
_GONE: Any = object()
_FLATTEN = 16
"""An overlay of at most this many entries (or the square root of its base's) is laid over
the base dict; a larger one is merged into a new base. Each observation copies the overlay and
a merge copies the base, so the bound that costs least per change grows as that root."""


class Index(Generic[_V]):
    """A read-only look-up table of an observation's members, read with ``get``.

    A base dict, shared between the observations of one pool, and a small overlay of what
    changed since it was built: carrying it to the next observation costs the changes, not a
    copy of every entry. Once the overlay outgrows ``_FLATTEN`` (and the root of the base's size)
    the two are merged into a new base, so the copying is spread over that many changes.
    """

    __slots__ = ("_base", "_overlay", "_size")

    def __init__(
        self, base: dict[str, _V], overlay: dict[str, Any] | None = None, size: int | None = None
    ) -> None:
        self._base = base
        self._overlay: dict[str, Any] = overlay if overlay is not None else {}
        self._size = len(base) if size is None else size

    def get(self, key: str, default: _V | None = None) -> _V | None:
        """The member under ``key``, or ``default``."""
        overlay = self._overlay
        if key in overlay:
            value = overlay[key]
            return default if value is _GONE else value
        return self._base.get(key, default)

    def __len__(self) -> int:
        return self._size

    def replacing(self, values: Mapping[str, _V]) -> Index[_V]:
        """This index with the entries of ``values`` (keys it holds) replaced."""
        if not values:
            return self
        return self._layered({**self._overlay, **values}, self._size)

    def changed(
        self,
        gone: Sequence[Any],
        added: Sequence[Any],
        key: Callable[[Any], str | None],
        expected: int,
    ) -> Index[_V] | None:
        """This index without ``gone`` and with ``added`` (each under ``key`` of it; a None key
        is not indexed), if it then holds ``expected`` entries; None when an added key is
        taken (a duplicate would make a look-up ambiguous) or the count is off (this index
        did not hold every member)."""
        overlay = dict(self._overlay)
        size = self._size

        def current(k: str) -> Any:
            if k in overlay:
                return overlay[k]
            return self._base.get(k, _GONE)

        for value in gone:
            k = key(value)
            if k is not None and current(k) is value:
                overlay[k] = _GONE
                size -= 1
        for value in added:
            k = key(value)
            if k is None:
                continue
            if current(k) is not _GONE:
                return None
            overlay[k] = value
            size += 1
        if size != expected:
            return None
        return self._layered(overlay, size)

    def _layered(self, overlay: dict[str, Any], size: int) -> Index[_V]:
        if len(overlay) <= max(_FLATTEN, math.isqrt(len(self._base))):
            return Index(self._base, overlay, size)
        base = dict(self._base)
        for k, value in overlay.items():
            if value is _GONE:
                base.pop(k, None)
            else:
                base[k] = value
        return Index(base, None, size)


Resources = Mapping[str, int]
"""Resource name -> quantity in milli-units (see the module docstring)."""


class ClusterConflict(Exception):
    """A conditional write lost a race: the object changed since it was read. Requeue and retry."""


class ObjectNotFound(LookupError):
    """The object a write addressed does not exist (any more). Requeue; the next pass sees it."""


class ObjectUnreadable(ValueError):
    """A pool's objects hold a value that neither Karpenter nor Kubernetes could have written
    (a duration, a time or a quantity that does not parse); the message names the object and
    the field. Nothing is decided on a guess: the controller holds that pool and serves the
    others."""

    def __init__(self, pool: str, message: str) -> None:
        super().__init__(message)
        self.pool = pool


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
    decided to replace the claim), ``drifted`` a True ``Drifted`` condition, and
    ``instance_terminating`` a True ``InstanceTerminating`` condition (drained, and the cloud
    provider is deleting the instance: Karpenter's budgets no longer count it).
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
    instance_terminating: bool = False

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
    ``budgets`` are ``spec.disruption.budgets`` (the gateway gives the CRD's default, 10%, for a
    NodePool that sets none; the empty default here means no budget); ``budget_problems`` says,
    field by field, which budgets could not be read (each stands in ``budgets`` as Karpenter
    uses it: allowing no disruption).
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
    budgets: tuple[Budget, ...] = ()
    budget_problems: tuple[str, ...] = ()
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
    # and a walk of a 10,000-claim tuple per look-up is most of a pass. An observation that
    # carries the changes since the one before takes that one's indexes over instead
    # (``inherit_indexes``).
    @cached_property
    def _claims_by_name(self) -> Index[NodeClaimView]:
        # Reversed, so that of two claims with one name the first wins, as a walk would find.
        claims = self.claims
        return Index(dict(zip(map(_name, reversed(claims)), reversed(claims), strict=True)))

    @cached_property
    def _nodes_by_name(self) -> Index[NodeView]:
        nodes = self.nodes
        return Index(dict(zip(map(_name, reversed(nodes)), reversed(nodes), strict=True)))

    @cached_property
    def _claims_by_node(self) -> Index[NodeClaimView]:
        bound = [c for c in reversed(self.claims) if c.node_name is not None]
        self.__dict__["_bound_claims"] = len(bound)  # two on one node: fewer entries than this
        return Index(dict(zip(map(_node_name, bound), bound, strict=True)))

    def with_changes(
        self,
        annotations: Mapping[str, str],
        claims: Mapping[str, NodeClaimView],
        nodes: Mapping[str, NodeView],
    ) -> PoolObservation:
        """This observation with the pool's annotations replaced and the named claims and
        nodes (the first of each name, as the look-ups find) replaced by new values of the same
        name, node binding and place. Its indexes are this one's with those entries laid over
        them, not a rebuild from every member."""
        changed = replace(
            self,
            serial=None,
            changes=None,
            annotations=annotations,
            claims=_substituted(self.claims, claims, self.claim),
            nodes=_substituted(self.nodes, nodes, self.node),
        )
        # The cached properties' slots, filled as their first use would fill them.
        slots = changed.__dict__
        slots["_claims_by_name"] = self._claims_by_name.replacing(claims)
        slots["_nodes_by_name"] = self._nodes_by_name.replacing(nodes)
        if "_claims_by_node" in self.__dict__:  # built already; else built when first asked
            by_node: dict[str, NodeClaimView] = {}
            for claim in claims.values():
                if claim.node_name is not None and self.claim_on(claim.node_name) is self.claim(
                    claim.name
                ):
                    by_node[claim.node_name] = claim
            slots["_claims_by_node"] = self._claims_by_node.replacing(by_node)
            slots["_bound_claims"] = self.__dict__["_bound_claims"]
        if "_pods_by_node" in self.__dict__:  # the Pods are this observation's
            slots["_pods_by_node"] = self._pods_by_node
        return changed

    def inherit_indexes(self, previous: PoolObservation) -> None:
        """Take over the look-up indexes of ``previous``, brought up to ``changes``, when this
        observation carries the changes since it: the same tables with the changed entries laid
        over them, so a pass pays for what changed, not for every member. ``previous`` builds
        any it had not yet, so every later observation carries them on. An index a duplicate
        name would make ambiguous is left to be built as usual."""
        changes = self.changes
        if changes is None or previous.serial is None or changes.since != previous.serial:
            return
        mine = self.__dict__
        by_name = previous._claims_by_name.changed(
            changes.claims_gone, changes.claims_added, _name, len(self.claims)
        )
        if by_name is not None and "_claims_by_name" not in mine:
            mine["_claims_by_name"] = by_name
        nodes = previous._nodes_by_name.changed(
            changes.nodes_gone, changes.nodes_added, _name, len(self.nodes)
        )
        if nodes is not None and "_nodes_by_name" not in mine:
            mine["_nodes_by_name"] = nodes
        by_node = previous._claims_by_node  # builds it, and the bound count, when not yet
        bound = previous.__dict__["_bound_claims"]
        bound += sum(c.node_name is not None for c in changes.claims_added)
        bound -= sum(c.node_name is not None for c in changes.claims_gone)
        carried = by_node.changed(changes.claims_gone, changes.claims_added, _node_name, bound)
        if carried is not None and "_claims_by_node" not in mine:
            mine["_claims_by_node"] = carried
            mine["_bound_claims"] = bound
        if "_pods_by_node" not in mine:
            self._carry_pods(previous, changes)

    def pods_on(self, node: str) -> tuple[PodView, ...]:
        """The non-placeholder Pods bound to ``node``, by namespace and name."""
        return self._pods_by_node.get(node) or ()

    @cached_property
    def _pods_by_node(self) -> Index[tuple[PodView, ...]]:
        grouped: dict[str, list[PodView]] = {}
        for pod in self.pods:
            if pod.node_name is not None:
                grouped.setdefault(pod.node_name, []).append(pod)
        return Index({n: tuple(sorted(on, key=_pod_key)) for n, on in grouped.items()})

    def _carry_pods(self, previous: PoolObservation, changes: MemberChanges) -> None:
        """``_pods_by_node`` from ``previous``'s, with the Pods that left or joined each node."""
        if not changes.pods_added and not changes.pods_gone:
            self.__dict__["_pods_by_node"] = previous._pods_by_node
            return
        index = previous._pods_by_node
        edited: dict[str, list[PodView]] = {}

        def on_node(name: str) -> list[PodView]:
            on = edited.get(name)
            if on is None:
                on = edited[name] = list(index.get(name) or ())
            return on

        for pod in changes.pods_gone:
            if pod.node_name is None:
                continue
            on = on_node(pod.node_name)
            kept = [p for p in on if p is not pod]
            if len(kept) == len(on):
                return  # not where the index has it: build afresh when asked
            on[:] = kept
        for pod in changes.pods_added:
            if pod.node_name is not None:
                bisect.insort(on_node(pod.node_name), pod, key=_pod_key)
        self.__dict__["_pods_by_node"] = index.replacing({n: tuple(on) for n, on in edited.items()})


_M = TypeVar("_M", NodeClaimView, NodeView)


def _substituted(
    values: tuple[_M, ...], by_name: Mapping[str, _M], lookup: Callable[[str], _M | None]
) -> tuple[_M, ...]:
    """``values`` with each named one (the first of its name, as ``lookup`` finds) replaced."""
    if not by_name:
        return values
    out = list(values)
    ids: list[int] | None = None
    for name, value in by_name.items():
        original = lookup(name)
        if original is None:
            continue
        # Gateways list members by name (as the API server does): a bisection finds the place
        # in a large pool; any other order falls back to a scan by identity (in C).
        i = bisect.bisect_left(values, name, key=_name)
        if i >= len(values) or values[i] is not original:
            if ids is None:
                ids = list(map(id, values))
            i = ids.index(id(original))
        out[i] = value
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
