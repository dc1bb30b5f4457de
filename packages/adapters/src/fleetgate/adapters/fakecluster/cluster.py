"""The fake cluster: in-memory NodePools, NodeClaims, Nodes and Pods with Karpenter's behaviour.

Time is the injected clock's. Things that take time (a claim launching, a drain, a forced
expiry) are queued as *happenings* at exact instants and applied, in order, whenever the cluster
is touched after the clock has passed them. ``next_event_at()`` tells a simulator where the next
one is, so virtual time can jump straight to it.

Karpenter's behaviour, simplified but faithful where the controller can tell:

* a Pending Pod that fits nowhere makes Karpenter launch a NodeClaim of the Pod's pool, which
  becomes Ready (with its Node) after the pool's provisioning delay; a Pod that fits on a Ready,
  schedulable node of its pool is bound there at once (spare capacity);
* a Pending workload Pod preempts lower-priority Pods (the placeholders) when that makes it fit;
* a deleted NodeClaim drains: its Pods are evicted (bare Pods die, owned ones go Pending and are
  rescheduled), and it disappears after the pool's drain time, or at its tGP if that is sooner;
* a NodeClaim reaching ``created_at + expire_after`` is force-expired (deleted the same way), and
  the expiry is recorded as a breach when the controller had not rotated it in time.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from fleetgate.adapters.fakecluster import scheduler
from fleetgate.adapters.fakecluster.faults import ControllerCrash, Faults
from fleetgate.adapters.fakecluster.model import (
    ARCH_LABEL,
    CAPACITY_TYPE_LABEL,
    HOSTNAME_LABEL,
    NODEPOOL_LABEL,
    ZONE_LABEL,
    Claim,
    Node,
    Pod,
    Pool,
)
from fleetgate.adapters.fakecluster.scheduler import BATCH
from fleetgate.domain.rotation.cluster import (
    ClusterConflict,
    ObjectNotFound,
    PlaceholderSpec,
    PoolObservation,
    Requirement,
    Taint,
)

UNSET: Any = object()
"""Marker for "inherit from the pool template" in ``add_node``."""


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
    ``placeholder-deleted``, ``placeholder-bound``, ``placeholder-preempted``, ``pod-bound``.
    """

    at: datetime
    kind: str
    name: str
    pool: str
    data: tuple[tuple[str, str], ...] = ()


def _duration(value: timedelta | str | None, field: str) -> timedelta | None:
    if value is None or isinstance(value, timedelta):
        return value
    from fleetgate.domain.durations import parse_duration

    try:
        return parse_duration(value)
    except ValueError as exc:
        raise ValueError(f"{field}: {exc}") from exc


class FakeCluster:
    """An in-memory cluster on a (virtual) clock. Implements ``ClusterGateway``.

    Options (all optional; also accepted as ``cluster_options`` settings): ``provisioning_delay``
    and ``drain_time`` (defaults for pools added later), ``placeholder_namespace``.
    """

    def __init__(
        self,
        clock: Any,
        *,
        provisioning_delay: timedelta | str = timedelta(minutes=2),
        drain_time: timedelta | str = timedelta(minutes=5),
        placeholder_namespace: str = "fleetgate-system",
        **_ignored: Any,
    ) -> None:
        self.clock = clock
        self.provisioning_delay = _duration(provisioning_delay, "provisioning_delay")
        self.drain_time = _duration(drain_time, "drain_time")
        self.placeholder_namespace = placeholder_namespace
        self.pools: dict[str, Pool] = {}
        self.claims: dict[str, Claim] = {}
        self.archive: dict[str, Claim] = {}  # every claim ever created, removed ones included
        self.pods: dict[tuple[str, str], Pod] = {}
        self.faults = Faults()
        self.history: list[ClusterRecord] = []
        self.breaches: list[ClusterRecord] = []
        self.policies: list[Mapping[str, Any]] | None = None
        self.writes = 0
        self._queue: list[tuple[datetime, int, str, str]] = []
        self._seq = itertools.count()
        self._names = itertools.count(1)
        self._listeners: list[Callable[[NodeChange], None]] = []
        self._scheduling = False  # the scheduler folds re-entrant calls into the running one
        self._rerun = False

    # --- seeding -----------------------------------------------------------------------------

    def add_pool(
        self,
        name: str,
        *,
        expire_after: timedelta | str | None,
        termination_grace_period: timedelta | str | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        requirements: Sequence[Requirement] = (),
        taints: Sequence[Taint] = (),
        limits: Mapping[str, int] | None = None,
        node_allocatable: Mapping[str, int] | None = None,
        node_labels: Mapping[str, str] | None = None,
        provisioning_delay: timedelta | str | None = None,
        drain_time: timedelta | str | None = None,
    ) -> Pool:
        """Create a NodePool (``expire_after`` None = Never; tGP None = unset)."""
        if name in self.pools:
            raise ValueError(f"pool: {name!r} already exists")
        pool = Pool(
            name=name,
            expire_after=_duration(expire_after, "expire_after"),
            termination_grace_period=_duration(
                termination_grace_period, "termination_grace_period"
            ),
            labels=dict(labels or {}),
            annotations=dict(annotations or {}),
            requirements=tuple(requirements),
            taints=tuple(taints),
            limits=dict(limits or {}),
            node_labels={
                ZONE_LABEL: "zone-a",
                ARCH_LABEL: "amd64",
                CAPACITY_TYPE_LABEL: "on-demand",
                **dict(node_labels or {}),
            },
            provisioning_delay=_first(
                _duration(provisioning_delay, "provisioning_delay"), self.provisioning_delay
            ),
            drain_time=_first(_duration(drain_time, "drain_time"), self.drain_time),
        )
        if node_allocatable is not None:
            pool.node_allocatable = dict(node_allocatable)
        self.pools[name] = pool
        return pool

    def add_node(
        self,
        pool: str,
        name: str | None = None,
        *,
        created_at: datetime | None = None,
        expire_after: timedelta | str | None = UNSET,
        termination_grace_period: timedelta | str | None = UNSET,
        ready: bool = True,
        allocatable: Mapping[str, int] | None = None,
        workload: Mapping[str, int] | None = None,
    ) -> str:
        """Add a launched NodeClaim with its Node (Ready unless ``ready=False``); return its name.

        ``expire_after`` / ``termination_grace_period`` default to the pool template's.
        ``workload`` adds one owned (ReplicaSet) Pod with these requests on the node, so that a
        placeholder sized like it cannot fit elsewhere and its eviction has somewhere to go.
        """
        p = self._pool(pool)
        claim = self._new_claim(
            p,
            name or self._next_name(pool),
            created_at or self.clock.now(),
            p.expire_after if expire_after is UNSET else _duration(expire_after, "expire_after"),
            p.termination_grace_period
            if termination_grace_period is UNSET
            else _duration(termination_grace_period, "termination_grace_period"),
            dict(allocatable) if allocatable is not None else dict(p.node_allocatable),
        )
        self._launch(claim, self.clock.now(), ready=ready)
        if workload is not None:
            self.add_pod(
                "default",
                f"{claim.name}-app",
                node=claim.name,
                requests=workload,
                pool=pool,
                owner_kind="ReplicaSet",
            )
        return claim.name

    def add_pod(
        self,
        namespace: str,
        name: str,
        *,
        node: str | None = None,
        requests: Mapping[str, int] | None = None,
        pool: str | None = None,
        owner_kind: str | None = "ReplicaSet",
        priority: int = 0,
    ) -> None:
        """Add a Pod, bound to ``node`` or Pending (then scheduled like any other)."""
        pod = Pod(
            namespace=namespace,
            name=name,
            seq=next(self._seq),
            requests=dict(requests or {}),
            pool=pool,
            owner_kind=owner_kind,
            priority=priority,
            node_name=node,
        )
        self.pods[pod.key] = pod
        if node is None:
            self._schedule(self.clock.now())

    def set_policies(self, manifests: Sequence[Mapping[str, Any]] | None) -> None:
        """Carry these RotationPolicy manifests (None: this cluster carries no policies)."""
        self.policies = None if manifests is None else list(manifests)

    def set_ready(self, claim: str, ready: bool) -> None:
        """Flip a launched claim's (and its Node's) Ready condition."""
        c = self._claim(claim)
        c.ready = ready
        if c.node is not None:
            c.node.ready = ready
            if ready:
                self._notify("ready", c.node, self.clock.now())

    # --- faults ------------------------------------------------------------------------------

    def fail_provisioning(self, pool: str, on: bool = True) -> None:
        """Claims launched for ``pool`` from now on never become Ready."""
        _toggle(self.faults.provisioning_never_completes, pool, on)

    def capacity_shortage(self, pool: str, on: bool = True) -> None:
        """No claim can be launched for ``pool``: Pending Pods stay Unschedulable."""
        _toggle(self.faults.capacity_shortage, pool, on)
        if not on:
            self._schedule(self.clock.now())

    def stick_drain(
        self, claim: str | None = None, *, pool: str | None = None, forever: bool = False
    ) -> None:
        """Drains of ``claim`` (or of every claim of ``pool``) finish only at the claim's tGP;
        with ``forever`` the claim's drain never finishes (a finalizer that never clears)."""
        if claim is not None:
            self.faults.stuck_drains.add(claim)
            if forever:
                self.faults.stuck_forever.add(claim)
        if pool is not None:
            self.faults.stuck_drain_pools.add(pool)

    def preempt_placeholders(self, pool: str | None = None) -> list[str]:
        """Preempt (delete) every placeholder Pod, or those of ``pool``; return their names."""
        gone = []
        for pod in sorted(self._placeholders(pool), key=lambda p: p.key):
            self._delete_pod(pod, self.clock.now(), "placeholder-preempted")
            gone.append(pod.name)
        return gone

    def crash_after(self, writes: int) -> None:
        """Arm a crash: the ``writes``-th write from now is applied, then ``ControllerCrash``."""
        if writes < 1:
            raise ValueError("writes: must be at least 1")
        self.faults.crash_after_writes = writes

    # --- listeners and time ------------------------------------------------------------------

    def subscribe(self, listener: Callable[[NodeChange], None]) -> Callable[[], None]:
        """Call ``listener`` on every Node change; return a function that unsubscribes it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def next_event_at(self) -> datetime | None:
        """The next instant at which the cluster changes by itself, or None if nothing is due."""
        while self._queue and not self._still_due(self._queue[0]):
            heapq.heappop(self._queue)
        return self._queue[0][0] if self._queue else None

    def advance_to(self, instant: datetime) -> None:
        """Move the clock to ``instant`` (if it has one to move) and apply what falls due."""
        if hasattr(self.clock, "set"):
            self.clock.set(instant)
        self.catch_up()

    def catch_up(self) -> None:
        """Apply, in time order, every happening due at or before the clock's now."""
        now = self.clock.now()
        while self._queue and self._queue[0][0] <= now:
            at, _, kind, name = heapq.heappop(self._queue)
            if not self._still_due((at, 0, kind, name)):
                continue
            if kind == "launch":
                self._become_ready(self.claims[name], at)
            elif kind == "drained":
                self._remove_claim(self.claims[name], at)
            elif kind == "expire":
                self._force_expire(self.claims[name], at)
            elif kind == "batch":
                self._schedule(at)

    # --- ClusterGateway: reads ---------------------------------------------------------------

    async def list_pools(self) -> Sequence[str]:
        """The pools' names, sorted."""
        self.catch_up()
        return sorted(self.pools)

    async def observe(self, pool: str) -> PoolObservation | None:
        """One pool with its claims, nodes, their pods, and its placeholders."""
        self.catch_up()
        p = self.pools.get(pool)
        if p is None:
            return None
        claims = sorted((c for c in self.claims.values() if c.pool == pool), key=lambda c: c.name)
        nodes = [c.node for c in claims if c.node is not None]
        node_names = {n.name for n in nodes}
        pods = [
            pod.view()
            for pod in sorted(self.pods.values(), key=lambda p: p.key)
            if pod.node_name in node_names and not _is_placeholder(pod)
        ]
        return PoolObservation(
            name=p.name,
            version=str(p.version),
            expire_after=p.expire_after,
            termination_grace_period=p.termination_grace_period,
            labels=dict(p.labels),
            annotations=dict(p.annotations),
            requirements=p.requirements,
            taints=p.taints,
            limits=dict(p.limits),
            resources=self.pool_resources(pool),
            claims=tuple(c.view() for c in claims),
            nodes=tuple(n.view() for n in nodes),
            pods=tuple(pods),
            placeholders=tuple(
                pod.view() for pod in sorted(self._placeholders(pool), key=lambda p: p.key)
            ),
        )

    async def list_policies(self) -> Sequence[Mapping[str, Any]] | None:
        """The manifests given to ``set_policies``, or None."""
        return None if self.policies is None else list(self.policies)

    # --- ClusterGateway: writes --------------------------------------------------------------

    async def annotate_pool(
        self, pool: str, patch: Mapping[str, str | None], *, expect_version: str | None = None
    ) -> str:
        """Merge-patch the pool's annotations, conditionally on its version."""
        self.catch_up()
        p = self._pool(pool)
        if expect_version is not None and expect_version != str(p.version):
            raise ClusterConflict(f"nodepool {pool}: version {p.version} != {expect_version}")
        _merge(p.annotations, patch)
        p.version += 1
        self._wrote()
        return str(p.version)

    async def annotate_claim(self, name: str, patch: Mapping[str, str | None]) -> None:
        """Merge-patch a claim's annotations."""
        self.catch_up()
        _merge(self._claim(name).annotations, patch)
        self._wrote()

    async def annotate_node(self, name: str, patch: Mapping[str, str | None]) -> None:
        """Merge-patch a node's annotations."""
        self.catch_up()
        _merge(self._node(name).annotations, patch)
        self._wrote()

    async def set_unschedulable(self, node: str, unschedulable: bool) -> None:
        """Cordon or uncordon a node."""
        self.catch_up()
        n = self._node(node)
        if n.unschedulable != unschedulable:
            n.unschedulable = unschedulable
            self._notify("cordoned" if unschedulable else "uncordoned", n, self.clock.now())
            if not unschedulable:
                self._schedule(self.clock.now())
        self._wrote()

    async def create_placeholder(self, spec: PlaceholderSpec) -> None:
        """Create the placeholder Pod (kept if one of that name exists) and schedule it."""
        self.catch_up()
        now = self.clock.now()
        if (spec.namespace, spec.name) not in self.pods:
            pod = Pod(
                namespace=spec.namespace,
                name=spec.name,
                seq=next(self._seq),
                requests=dict(spec.requests),
                pool=spec.pool,
                priority=-10,
                owner_kind=None,
                labels=dict(spec.labels),
                annotations=dict(spec.annotations),
                avoid_hosts=tuple(spec.avoid_hosts),
                required=tuple(spec.required),
            )
            self.pods[pod.key] = pod
            self._record(now, "placeholder-created", spec.name, spec.pool, surge_for=spec.surge_for)
            self._schedule(now)
        self._wrote()

    async def delete_placeholder(self, namespace: str, name: str) -> None:
        """Delete a placeholder Pod (no-op when gone)."""
        self.catch_up()
        pod = self.pods.get((namespace, name))
        if pod is not None:
            self._delete_pod(pod, self.clock.now(), "placeholder-deleted")
        self._wrote()

    async def delete_claim(self, name: str) -> None:
        """Delete a claim: start its drain (no-op when already deleting or gone)."""
        self.catch_up()
        claim = self.claims.get(name)
        if claim is not None and claim.deleting_at is None:
            self._start_deletion(claim, self.clock.now())
        self._wrote()

    # --- inspection --------------------------------------------------------------------------

    def pool_resources(self, pool: str) -> dict[str, int]:
        """``status.resources``: the summed allocatable of the pool's claims."""
        total: dict[str, int] = {}
        for claim in self.claims.values():
            if claim.pool == pool:
                for name, value in claim.allocatable.items():
                    total[name] = total.get(name, 0) + value
        return total

    def node_of(self, claim: str) -> Node | None:
        """The Node of ``claim``, if launched."""
        c = self.claims.get(claim)
        return c.node if c else None

    # --- Karpenter's behaviour ---------------------------------------------------------------

    def _new_claim(
        self,
        pool: Pool,
        name: str,
        created_at: datetime,
        expire_after: timedelta | None,
        tgp: timedelta | None,
        allocatable: dict[str, int],
    ) -> Claim:
        if name in self.claims:
            raise ValueError(f"node: {name!r} already exists")
        claim = Claim(
            name=name,
            pool=pool.name,
            created_at=created_at,
            expire_after=expire_after,
            termination_grace_period=tgp,
            allocatable=allocatable,
            labels={NODEPOOL_LABEL: pool.name, **pool.node_labels},
        )
        self.claims[name] = claim
        self.archive[name] = claim
        self._record(created_at, "claim-created", name, pool.name)
        if expire_after is not None:
            self._at(created_at + expire_after, "expire", name)
        return claim

    def _launch(self, claim: Claim, at: datetime, *, ready: bool = True) -> None:
        claim.node = Node(
            name=claim.name,
            pool=claim.pool,
            allocatable=dict(claim.allocatable),
            labels={**claim.labels, HOSTNAME_LABEL: claim.name},
            ready=False,
        )
        if ready:
            self._become_ready(claim, at)

    def _become_ready(self, claim: Claim, at: datetime) -> None:
        if claim.node is None:
            self._launch(claim, at, ready=False)
            assert claim.node is not None
        claim.ready = claim.node.ready = True
        self._record(at, "claim-ready", claim.name, claim.pool)
        self._notify("ready", claim.node, at)
        self._schedule(at)

    def provision(self, pool: Pool, at: datetime) -> Claim:
        """Launch a new claim for ``pool`` (Ready after its provisioning delay unless faulted)."""
        claim = self._new_claim(
            pool,
            self._next_name(pool.name),
            at,
            pool.expire_after,
            pool.termination_grace_period,
            dict(pool.node_allocatable),
        )
        if pool.name not in self.faults.provisioning_never_completes:
            # The pool's delay runs from the Pod going Pending; the batch window is part of it.
            self._at(at + max(pool.provisioning_delay - BATCH, timedelta(0)), "launch", claim.name)
        return claim

    def _start_deletion(self, claim: Claim, at: datetime) -> None:
        claim.deleting_at = at
        self._record(at, "claim-deleting", claim.name, claim.pool)
        pool = self.pools[claim.pool]
        stuck = (
            claim.name in self.faults.stuck_drains or claim.pool in self.faults.stuck_drain_pools
        )
        drain = None if stuck else pool.drain_time
        tgp = claim.termination_grace_period
        bound = [d for d in (drain, tgp) if d is not None]
        if claim.node is None:
            bound = [timedelta(0)]  # nothing to drain
        if claim.name in self.faults.stuck_forever:
            bound = []
        if bound:
            self._at(at + min(bound), "drained", claim.name)
        if claim.node is not None:
            for pod in sorted(self.pods.values(), key=lambda p: p.seq):
                if pod.node_name == claim.node.name and pod.owner_kind != "DaemonSet":
                    if pod.owner_kind is None:
                        self._delete_pod(
                            pod,
                            at,
                            "placeholder-deleted" if _is_placeholder(pod) else "pod-deleted",
                        )
                    else:
                        pod.node_name = None
                        pod.pending_since = at
        self._schedule(at)

    def _force_expire(self, claim: Claim, at: datetime) -> None:
        if claim.deleting_at is None:
            record = self._record(at, "claim-expired", claim.name, claim.pool)
            self.breaches.append(record)
            self._start_deletion(claim, at)

    def _remove_claim(self, claim: Claim, at: datetime) -> None:
        del self.claims[claim.name]
        if claim.node is not None:
            for pod in list(self.pods.values()):
                if pod.node_name == claim.node.name:
                    if pod.owner_kind in (None, "DaemonSet"):
                        del self.pods[pod.key]
                    else:
                        pod.node_name = None
                        pod.pending_since = at
            self._notify("removed", claim.node, at)
        for pod in self.pods.values():
            if pod.nominated_claim == claim.name:
                pod.nominated_claim = None
        self._record(at, "claim-removed", claim.name, claim.pool)
        self._schedule(at)

    def _schedule(self, at: datetime) -> None:
        scheduler.schedule(self, at)

    # --- helpers -----------------------------------------------------------------------------

    def _delete_pod(self, pod: Pod, at: datetime, kind: str) -> None:
        del self.pods[pod.key]
        if _is_placeholder(pod):
            self._record(at, kind, pod.name, pod.pool or "")
            self._schedule(at)

    def _placeholders(self, pool: str | None) -> list[Pod]:
        return [
            p for p in self.pods.values() if _is_placeholder(p) and (pool is None or p.pool == pool)
        ]

    def _at(self, at: datetime, kind: str, name: str) -> None:
        heapq.heappush(self._queue, (at, next(self._seq), kind, name))

    def _still_due(self, item: tuple[datetime, int, str, str]) -> bool:
        _, _, kind, name = item
        if kind == "batch":
            return any(p.node_name is None and p.pool == name for p in self.pods.values())
        claim = self.claims.get(name)
        if claim is None:
            return False
        if kind == "launch":
            return not claim.ready and claim.deleting_at is None
        if kind == "expire":
            return claim.deleting_at is None
        return True

    def _record(self, at: datetime, kind: str, name: str, pool: str, **data: str) -> ClusterRecord:
        record = ClusterRecord(
            at=at, kind=kind, name=name, pool=pool, data=tuple(sorted(data.items()))
        )
        self.history.append(record)
        return record

    def _notify(self, kind: str, node: Node, at: datetime) -> None:
        change = NodeChange(kind=kind, node=node.name, pool=node.pool, at=at)
        for listener in list(self._listeners):
            listener(change)

    def _wrote(self) -> None:
        self.writes += 1
        left = self.faults.crash_after_writes
        if left is not None:
            if left <= 1:
                self.faults.crash_after_writes = None
                raise ControllerCrash(f"injected crash after write #{self.writes}")
            self.faults.crash_after_writes = left - 1

    def _next_name(self, pool: str) -> str:
        while True:
            name = f"{pool}-{next(self._names):04d}"
            if name not in self.claims:
                return name

    def _pool(self, name: str) -> Pool:
        try:
            return self.pools[name]
        except KeyError:
            raise ObjectNotFound(f"nodepool {name!r} not found") from None

    def _claim(self, name: str) -> Claim:
        try:
            return self.claims[name]
        except KeyError:
            raise ObjectNotFound(f"nodeclaim {name!r} not found") from None

    def _node(self, name: str) -> Node:
        claim = self.claims.get(name)
        if claim is None or claim.node is None:
            raise ObjectNotFound(f"node {name!r} not found")
        return claim.node


def _is_placeholder(pod: Pod) -> bool:
    return pod.priority < 0 and pod.owner_kind is None


def _merge(target: dict[str, str], patch: Mapping[str, str | None]) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value


def _toggle(items: set[str], name: str, on: bool) -> None:
    if on:
        items.add(name)
    else:
        items.discard(name)


def _first(*values: timedelta | None) -> timedelta:
    """The first value that is set (0 counts as set), else 0."""
    return next((v for v in values if v is not None), timedelta(0))
