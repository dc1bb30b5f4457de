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
from datetime import datetime, timedelta
from operator import attrgetter
from typing import Any

from fleetgate.adapters.fakecluster.faults import Faults
from fleetgate.adapters.fakecluster.lifecycle import KarpenterLifecycle
from fleetgate.adapters.fakecluster.members import PoolMembers
from fleetgate.adapters.fakecluster.model import (
    ARCH_LABEL,
    CAPACITY_TYPE_LABEL,
    ZONE_LABEL,
    Claim,
    ClusterRecord,
    NodeChange,
    Pod,
    Pool,
    Revisions,
)
from fleetgate.adapters.fakecluster.pdb import IF_HEALTHY_BUDGET, DisruptionBudget
from fleetgate.adapters.fakecluster.tables import ClaimTable, PodTable
from fleetgate.domain.rotation.budgets import Budget
from fleetgate.domain.rotation.cluster import (
    ClusterConflict,
    ObjectNotFound,
    PlaceholderSpec,
    PoolObservation,
    Requirement,
    Taint,
)
from fleetgate.domain.rotation.disruption import DISRUPTED_TAINT, NODES
from fleetgate.domain.rotation.status import PolicyStatus

UNSET: Any = object()
"""Marker for "inherit from the pool template" in ``add_node``."""


def _duration(value: timedelta | str | None, field: str) -> timedelta | None:
    if value is None or isinstance(value, timedelta):
        return value
    from fleetgate.domain.durations import parse_duration

    try:
        return parse_duration(value)
    except ValueError as exc:
        raise ValueError(f"{field}: {exc}") from exc


#: The label of the workload Pod ``add_node`` puts on a node (its value: the pool's name), for a
#: PodDisruptionBudget to select.
WORKLOAD_LABEL = "app"


class FakeCluster(KarpenterLifecycle):
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
        self.claims = ClaimTable()
        self.archive: dict[str, Claim] = {}  # every claim ever created, removed ones included
        self.pods = PodTable()
        self.faults = Faults()
        self.history: list[ClusterRecord] = []
        self.breaches: list[ClusterRecord] = []
        self.policies: list[Mapping[str, Any]] | None = None
        # The status last written per policy name (also mirrored into ``policies``' manifests).
        self.policy_statuses: dict[str, PolicyStatus] = {}
        self.policy_status_writes = 0
        self.writes = 0
        self._queue: list[tuple[datetime, int, str, str]] = []
        self._check: Callable[[datetime], None] | None = None
        self._seq = itertools.count()
        self._names = itertools.count(1)
        self._listeners: list[Callable[[NodeChange], None]] = []
        self._scheduling = False  # the scheduler folds re-entrant calls into the running one
        self._rerun = False
        self._revisions = Revisions()
        self._revisions.on_pod = self.pods.changed
        self._revisions.on_claim = self.claims.changed
        # Per pool: the observation last handed out, reused while nothing at all has changed,
        # and its members (claims, nodes, pods, placeholders), reused while none joined or left.
        self._observed: dict[str, tuple[int, PoolObservation]] = {}
        self._serial = 0  # numbers the observations it hands out
        self._disruptions: dict[str, str] = {}  # claim -> reason, for a queued ``disrupt_at``
        self._replacing: dict[str, str] = {}  # Karpenter's replacement -> the claim it replaces
        self._budget_blocked: set[str] = set()  # claims whose disruption budgets hold back
        self._members: dict[str, PoolMembers] = {}
        self.pdbs: list[DisruptionBudget] = []  # PodDisruptionBudgets (see ``add_pdb``)
        self._held: dict[str, datetime] = {}
        self._drain_due: set[str] = set()
        self._retrying: set[str] = set()

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
        replicas: int | None = None,
        ready: bool = True,
        budgets: Sequence[Budget] | None = None,
    ) -> Pool:
        """Create a NodePool (``expire_after`` None = Never; tGP None = unset; ``replicas`` set:
        a static pool; ``ready`` False: its Ready condition is False; ``budgets`` None: the
        CRD's default disruption budget, 10% for every reason)."""
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
        pool.replicas, pool.ready = replicas, ready
        if budgets is not None:
            pool.budgets = tuple(budgets)
        self.pools[name] = pool
        pool.attach(self._revisions)
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
                labels={WORKLOAD_LABEL: pool},
            )
        return claim.name

    def add_pdb(
        self,
        namespace: str,
        name: str,
        *,
        match_labels: Mapping[str, str],
        min_available: int | str | None = None,
        max_unavailable: int | str | None = None,
        unhealthy_policy: str = IF_HEALTHY_BUDGET,
    ) -> None:
        """Add a PodDisruptionBudget over the Pods of ``namespace`` carrying ``match_labels``
        (exactly one of ``min_available`` / ``max_unavailable``, a count or a percentage).

        Karpenter's drains then evict those Pods only as the budget allows (see ``pdb``); the
        workload Pod ``add_node`` puts on a node carries ``{WORKLOAD_LABEL: <pool>}``.
        """
        if (min_available is None) == (max_unavailable is None):
            raise ValueError(
                "a PodDisruptionBudget takes exactly one of minAvailable or maxUnavailable"
            )
        self.pdbs.append(
            DisruptionBudget(
                namespace,
                name,
                dict(match_labels),
                min_available=min_available,
                max_unavailable=max_unavailable,
                unhealthy_policy=unhealthy_policy,
            )
        )

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
        annotations: Mapping[str, str] | None = None,
        started_at: datetime | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        """Add a Pod, bound to ``node`` or Pending (then scheduled like any other).

        ``annotations`` may carry ``karpenter.sh/do-not-disrupt`` (``"true"`` or a duration
        counted from ``started_at``, the Pod's ``status.startTime``; default: now if bound).
        """
        if started_at is None and node is not None:
            started_at = self.clock.now()
        pod = Pod(
            namespace=namespace,
            name=name,
            seq=next(self._seq),
            requests=dict(requests or {}),
            pool=pool,
            owner_kind=owner_kind,
            priority=priority,
            node_name=node,
            annotations=dict(annotations or {}),
            labels=dict(labels or {}),
            started_at=started_at,
        )
        self.pods[pod.key] = pod
        pod.attach(self._revisions)
        if node is None:
            self._schedule(self.clock.now())

    def set_policies(self, manifests: Sequence[Mapping[str, Any]] | None) -> None:
        """Carry these RotationPolicy manifests (None: this cluster carries no policies).

        Each gets ``metadata.generation`` 1 unless it has one, as an API server would set it.
        """
        self.policies = None if manifests is None else [_stored(m) for m in manifests]

    def set_ready(self, claim: str, ready: bool) -> None:
        """Flip a launched claim's (and its Node's) Ready condition."""
        c = self._claim(claim)
        c.ready = ready
        if c.node is not None:
            c.node.ready = ready
            if ready:
                self._notify("ready", c.node, self.clock.now())
        if self._held:  # its Pods' health counts in PodDisruptionBudgets
            self._recheck_held(self.clock.now())

    def set_pool_ready(self, pool: str, ready: bool) -> None:
        """Flip a NodePool's Ready condition (Karpenter provisions nothing from a pool that is
        not Ready; fleetgate starts no rotation in it). Ready again, its Pending Pods are
        reconsidered and a static pool is topped up to its replicas."""
        p = self._pool(pool)
        if p.ready != ready:
            p.ready = ready
            if ready:
                now = self.clock.now()
                self._keep_replicas(p, now)
                self._schedule(now)

    def set_drifted(self, claim: str, drifted: bool = True) -> None:
        """Set a claim's ``Drifted`` condition (Karpenter will replace it itself)."""
        self._claim(claim).drifted = drifted

    def karpenter_disrupt(self, claim: str, reason: str = "Underutilized") -> str:
        """Karpenter replaces ``claim`` on its own: taints its node ``karpenter.sh/disrupted``,
        sets ``DisruptionReason``, launches a replacement (returned) and deletes the claim."""
        c = self._claim(claim)
        c.disruption_reason = reason
        if c.node is not None:
            c.node.taints = (*c.node.taints, Taint(DISRUPTED_TAINT, "", "NoSchedule"))
        replacement = self.add_node(c.pool)
        if c.deleting_at is None:
            self._start_deletion(c, self.clock.now())
        return replacement

    def disrupt_at(self, claim: str, at: datetime, reason: str = "Underutilized") -> None:
        """Karpenter decides at ``at`` to replace ``claim`` itself, make before break: it taints
        the node ``karpenter.sh/disrupted``, sets ``DisruptionReason``, launches a replacement
        (Ready after the pool's provisioning delay) and deletes the claim once that is Ready."""
        self._claim(claim)
        self._disruptions[claim] = reason
        self._at(at, "disrupt", claim)

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

    def conflict_policy_status(self, times: int = 1) -> None:
        """The next ``times`` RotationPolicy status writes lose a conflict."""
        self.faults.policy_status_conflicts = times

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

    def watch(self, check: Callable[[datetime], None] | None) -> None:
        """Call ``check`` before each happening from now on (see ``SimulatedCluster``)."""
        self._check = check

    def catch_up(self) -> None:
        """Apply, in time order, every happening due at or before the clock's now."""
        now = self.clock.now()
        check = self._check
        while self._queue and self._queue[0][0] <= now:
            at, _, kind, name = heapq.heappop(self._queue)
            if not self._still_due((at, 0, kind, name)):
                continue
            if check is not None:
                check(at)
            if kind == "launch":
                self._become_ready(self.claims[name], at)
            elif kind == "drained":
                self._drained(self.claims[name], at)
            elif kind == "evict":
                self._retry_evictions(self.claims[name], at)
            elif kind == "drain-deadline":
                self._drain_deadline(self.claims[name], at)
            elif kind == "expire":
                self._force_expire(self.claims[name], at)
            elif kind == "batch":
                self._schedule(at)
            elif kind == "disrupt":
                self._disrupt(self.claims[name], self._disruptions.pop(name, "Underutilized"), at)

    # --- ClusterGateway: reads ---------------------------------------------------------------

    async def list_pools(self) -> Sequence[str]:
        """The pools' names, sorted."""
        self.catch_up()
        return sorted(self.pools)

    async def observe(self, pool: str) -> PoolObservation | None:
        """One pool with its claims, nodes, their pods, and its placeholders.

        Each object's value is built once per change of that object (see ``model``), the pool's
        member lists once per claim or Pod joining, leaving or moving, and the whole
        observation is handed out again while nothing in the cluster changed.
        """
        self.catch_up()
        p = self.pools.get(pool)
        if p is None:
            return None
        revisions = self._revisions
        observed = self._observed.get(pool)
        if observed is not None and observed[0] == revisions.any:
            return observed[1]
        members = self._members_of(pool)
        claims, nodes, pods, placeholders = members.shown()
        # Handed over with the changes since this pool's last observation: a reader that
        # took that one in need not compare every member (an informer's deltas, in effect).
        self._serial += 1
        last = observed[1].serial if observed is not None else None
        if last is not None and members.shown_in == last:
            changes = members.changes(last)
        else:
            changes = None
            members.forget_changes()
        members.shown_in = self._serial
        obs = PoolObservation(
            name=p.name,
            version=str(p.version),
            expire_after=p.expire_after,
            termination_grace_period=p.termination_grace_period,
            labels=dict(p.labels),
            annotations=dict(p.annotations),
            requirements=p.requirements,
            taints=p.taints,
            limits=dict(p.limits),
            # status.resources also counts the pool's nodes, as Karpenter's counter does.
            resources={**members.resources, NODES: 1000 * len(claims)},
            claims=claims,
            nodes=nodes,
            pods=pods,
            placeholders=placeholders,
            replicas=p.replicas,
            ready=p.ready,
            budgets=p.budgets,
            serial=self._serial,
            changes=changes,
        )
        if observed is not None:
            obs.inherit_indexes(observed[1])
        self._observed[pool] = (revisions.any, obs)
        return obs

    def pool_resources(self, pool: str) -> dict[str, int]:
        """``status.resources``: the summed allocatable of the pool's claims (kept by change)."""
        return dict(self._members_of(pool).resources)

    def _members_of(self, pool: str) -> PoolMembers:
        """The pool's members, brought up to date with the records changed since last time."""
        dirty = self._revisions.dirty
        if dirty:
            for kept in self._members.values():
                kept.pending.update(dirty)
            dirty.clear()
        members = self._members.get(pool)
        if members is None:
            members = self._members[pool] = PoolMembers(self, pool)
        else:
            members.apply(self)
        return members

    async def list_policies(self) -> Sequence[Mapping[str, Any]] | None:
        """The manifests given to ``set_policies``, or None."""
        return None if self.policies is None else list(self.policies)

    # --- ClusterGateway: writes --------------------------------------------------------------

    async def write_policy_status(self, name: str, status: PolicyStatus) -> bool:
        """Store the policy's status; False while a conflict is injected.

        A cluster carrying manifests has only those policies (another name is ObjectNotFound)
        and shows the status in them; one carrying none stands in for the cluster the
        controller's file policies would live on, so it stores any name. Not counted in
        ``writes``: a status is bookkeeping, not a step a crash test injects between.
        """
        if self.faults.policy_status_conflicts > 0:
            self.faults.policy_status_conflicts -= 1
            return False
        if self.policies is not None:
            index = next(
                (
                    i
                    for i, m in enumerate(self.policies)
                    if (m.get("metadata") or {}).get("name") == name
                ),
                None,
            )
            if index is None:
                raise ObjectNotFound(f"rotationpolicy {name} not found")
            self.policies[index] = {**self.policies[index], "status": status.as_manifest()}
        self.policy_statuses[name] = status
        self.policy_status_writes += 1
        return True

    async def annotate_pool(
        self, pool: str, patch: Mapping[str, str | None], *, expect_version: str | None = None
    ) -> str:
        """Merge-patch the pool's annotations, conditionally on its version."""
        self.catch_up()
        p = self._pool(pool)
        if expect_version is not None and expect_version != str(p.version):
            raise ClusterConflict(f"nodepool {pool}: version {p.version} != {expect_version}")
        _merge(p.annotations, patch)
        p.touch()
        p.version += 1
        self._wrote()
        return str(p.version)

    async def annotate_claim(self, name: str, patch: Mapping[str, str | None]) -> None:
        """Merge-patch a claim's annotations."""
        self.catch_up()
        claim = self._claim(name)
        _merge(claim.annotations, patch)
        claim.touch()
        self._wrote()

    async def annotate_node(self, name: str, patch: Mapping[str, str | None]) -> None:
        """Merge-patch a node's annotations."""
        self.catch_up()
        node = self._node(name)
        _merge(node.annotations, patch)
        node.touch()
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
            pod.attach(self._revisions)
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


_by_name = attrgetter("name")
_by_key = attrgetter("namespace", "name")


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


def _stored(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """A policy manifest as the API server keeps it: with a ``metadata.generation``."""
    metadata = dict(manifest.get("metadata") or {})
    metadata.setdefault("generation", 1)
    return {**manifest, "metadata": metadata}
