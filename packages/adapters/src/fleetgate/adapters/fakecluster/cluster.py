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

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from fleetgate.adapters.fakecluster.faults import Faults
from fleetgate.adapters.fakecluster.journal import Journal
from fleetgate.adapters.fakecluster.lifecycle import KarpenterLifecycle
from fleetgate.adapters.fakecluster.model import (
    ARCH_LABEL,
    CAPACITY_TYPE_LABEL,
    ZONE_LABEL,
    Claim,
    ClusterRecord,
    NodeChange,
    Pod,
    Pool,
)
from fleetgate.adapters.fakecluster.observations import Observations
from fleetgate.adapters.fakecluster.pdb import IF_HEALTHY_BUDGET, DisruptionBudget
from fleetgate.adapters.fakecluster.policies import PolicyStore
from fleetgate.adapters.fakecluster.state import ClusterState
from fleetgate.adapters.fakecluster.tables import ClaimTable, PodTable
from fleetgate.adapters.fakecluster.timeline import Timeline
from fleetgate.domain.rotation.budgets import Budget
from fleetgate.domain.rotation.cluster import (
    ClusterConflict,
    PlaceholderSpec,
    PoolObservation,
    Requirement,
    Taint,
)
from fleetgate.domain.rotation.disruption import DISRUPTED_TAINT
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


class FakeCluster:
    """An in-memory cluster on a (virtual) clock. Implements ``ClusterGateway``.

    The public surface (seeding, faults, time, the gateway); the work is done by its rooms:
    ``state`` (the records), ``journal`` (history, listeners, write count), ``timeline`` (the
    timed happenings), ``karpenter`` (launching, draining, expiring, scheduling),
    ``observations`` (what ``observe`` hands out) and ``policy_store`` (RotationPolicies).

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
        self.provisioning_delay = _duration(provisioning_delay, "provisioning_delay")
        self.drain_time = _duration(drain_time, "drain_time")
        self.placeholder_namespace = placeholder_namespace
        self.state = state = ClusterState(clock)
        self.journal = Journal(state.faults)
        self.timeline = Timeline(state.seq)
        self.observations = Observations(state)
        self.karpenter = KarpenterLifecycle(
            state, self.journal, self.timeline, self.observations.pool_resources
        )
        self.policy_store = PolicyStore(state.faults)
        self._check: Callable[[datetime], None] | None = None
        # The records, by the names tests and the simulator read them under (the same objects).
        self.clock = clock
        self.pools: dict[str, Pool] = state.pools
        self.claims: ClaimTable = state.claims
        self.archive: dict[str, Claim] = state.archive
        self.pods: PodTable = state.pods
        self.faults: Faults = state.faults
        self.pdbs: list[DisruptionBudget] = state.pdbs  # PodDisruptionBudgets (``add_pdb``)
        self.history: list[ClusterRecord] = self.journal.history
        self.breaches: list[ClusterRecord] = self.journal.breaches

    @property
    def writes(self) -> int:
        """The controller's writes so far (a policy status is not one)."""
        return self.journal.writes

    @property
    def policies(self) -> list[Mapping[str, Any]] | None:
        """The RotationPolicy manifests carried (None: none)."""
        return self.policy_store.manifests

    @property
    def policy_statuses(self) -> dict[str, PolicyStatus]:
        """The status last written per policy name."""
        return self.policy_store.statuses

    @property
    def policy_status_writes(self) -> int:
        """How many policy statuses were written."""
        return self.policy_store.writes

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
        pool.attach(self.state.revisions)
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
        p = self.state.pool(pool)
        claim = self.karpenter.new_claim(
            p,
            name or self.karpenter.next_name(pool),
            created_at or self.clock.now(),
            p.expire_after if expire_after is UNSET else _duration(expire_after, "expire_after"),
            p.termination_grace_period
            if termination_grace_period is UNSET
            else _duration(termination_grace_period, "termination_grace_period"),
            dict(allocatable) if allocatable is not None else dict(p.node_allocatable),
        )
        self.karpenter.launch(claim, self.clock.now(), ready=ready)
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
        termination_grace_period: timedelta = timedelta(seconds=30),
    ) -> None:
        """Add a Pod, bound to ``node`` or Pending (then scheduled like any other).

        ``annotations`` may carry ``karpenter.sh/do-not-disrupt`` (``"true"`` or a duration
        counted from ``started_at``, the Pod's ``status.startTime``; default: now if bound): a
        drain then leaves the Pod until it is forced, ``termination_grace_period`` (the API
        server's default 30 s) before the claim's deadline.
        """
        if started_at is None and node is not None:
            started_at = self.clock.now()
        pod = Pod(
            namespace=namespace,
            name=name,
            seq=next(self.state.seq),
            requests=dict(requests or {}),
            pool=pool,
            owner_kind=owner_kind,
            priority=priority,
            node_name=node,
            annotations=dict(annotations or {}),
            labels=dict(labels or {}),
            started_at=started_at,
            termination_grace_period=termination_grace_period,
        )
        self.pods[pod.key] = pod
        pod.attach(self.state.revisions)
        if node is None:
            self.karpenter.schedule(self.clock.now())

    def set_policies(self, manifests: Sequence[Mapping[str, Any]] | None) -> None:
        """Carry these RotationPolicy manifests (None: this cluster carries no policies).

        Each gets ``metadata.generation`` 1 unless it has one, as an API server would set it.
        """
        self.policy_store.set(manifests)

    def set_ready(self, claim: str, ready: bool) -> None:
        """Flip a launched claim's (and its Node's) Ready condition."""
        c = self.state.claim(claim)
        c.ready = ready
        if c.node is not None:
            c.node.ready = ready
            if ready:
                self.journal.notify("ready", c.node, self.clock.now())
        self.karpenter.node_ready_changed(self.clock.now())

    def set_pool_ready(self, pool: str, ready: bool) -> None:
        """Flip a NodePool's Ready condition (Karpenter provisions nothing from a pool that is
        not Ready; fleetgate starts no rotation in it). Ready again, its Pending Pods are
        reconsidered and a static pool is topped up to its replicas."""
        p = self.state.pool(pool)
        if p.ready != ready:
            p.ready = ready
            if ready:
                now = self.clock.now()
                self.karpenter.keep_replicas(p, now)
                self.karpenter.schedule(now)

    def set_drifted(self, claim: str, drifted: bool = True) -> None:
        """Set a claim's ``Drifted`` condition (Karpenter will replace it itself)."""
        self.state.claim(claim).drifted = drifted

    def karpenter_disrupt(self, claim: str, reason: str = "Underutilized") -> str:
        """Karpenter replaces ``claim`` on its own: taints its node ``karpenter.sh/disrupted``,
        sets ``DisruptionReason``, launches a replacement (returned) and deletes the claim."""
        c = self.state.claim(claim)
        c.disruption_reason = reason
        if c.node is not None:
            c.node.taints = (*c.node.taints, Taint(DISRUPTED_TAINT, "", "NoSchedule"))
        replacement = self.add_node(c.pool)
        if c.deleting_at is None:
            self.karpenter.start_deletion(c, self.clock.now())
        return replacement

    def disrupt_at(self, claim: str, at: datetime, reason: str = "Underutilized") -> None:
        """Karpenter decides at ``at`` to replace ``claim`` itself, make before break: it taints
        the node ``karpenter.sh/disrupted``, sets ``DisruptionReason``, launches a replacement
        (Ready after the pool's provisioning delay) and deletes the claim once that is Ready."""
        self.state.claim(claim)
        self.karpenter.disrupt_at(claim, at, reason)

    # --- faults ------------------------------------------------------------------------------

    def fail_provisioning(self, pool: str, on: bool = True) -> None:
        """Claims launched for ``pool`` from now on never become Ready."""
        _toggle(self.faults.provisioning_never_completes, pool, on)

    def capacity_shortage(self, pool: str, on: bool = True) -> None:
        """No claim can be launched for ``pool``: Pending Pods stay Unschedulable."""
        _toggle(self.faults.capacity_shortage, pool, on)
        if not on:
            self.karpenter.schedule(self.clock.now())

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
        for pod in sorted(self.pods.placeholders_of(pool), key=lambda p: p.key):
            self.karpenter.delete_pod(pod, self.clock.now(), "placeholder-preempted")
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
        return self.journal.subscribe(listener)

    def next_event_at(self) -> datetime | None:
        """The next instant at which the cluster changes by itself, or None if nothing is due."""
        return self.timeline.next_at(self.karpenter.still_due)

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
        check = self._check
        karpenter = self.karpenter
        for at, kind, name in self.timeline.due(self.clock.now(), karpenter.still_due):
            if check is not None:
                check(at)
            karpenter.happen(kind, name, at)

    # --- ClusterGateway: reads ---------------------------------------------------------------

    async def list_pools(self) -> Sequence[str]:
        """The pools' names, sorted."""
        self.catch_up()
        return sorted(self.pools)

    async def observe(self, pool: str) -> PoolObservation | None:
        """One pool with its claims, nodes, their pods, and its placeholders (see
        ``observations``: handed out again while nothing in the cluster changed)."""
        self.catch_up()
        return self.observations.observe(pool)

    def pool_resources(self, pool: str) -> dict[str, int]:
        """``status.resources``: the summed allocatable of the pool's claims (kept by change)."""
        return self.observations.pool_resources(pool)

    async def list_policies(self) -> Sequence[Mapping[str, Any]] | None:
        """The manifests given to ``set_policies``, or None."""
        return None if self.policies is None else list(self.policies)

    # --- ClusterGateway: writes --------------------------------------------------------------

    async def write_policy_status(self, name: str, status: PolicyStatus) -> bool:
        """Store the policy's status; False while a conflict is injected (see ``policies``).

        Not counted in ``writes``: a status is bookkeeping, not a step a crash test injects
        between.
        """
        return self.policy_store.write_status(name, status)

    async def annotate_pool(
        self, pool: str, patch: Mapping[str, str | None], *, expect_version: str | None = None
    ) -> str:
        """Merge-patch the pool's annotations, conditionally on its version."""
        self.catch_up()
        p = self.state.pool(pool)
        if expect_version is not None and expect_version != str(p.version):
            raise ClusterConflict(f"nodepool {pool}: version {p.version} != {expect_version}")
        _merge(p.annotations, patch)
        p.touch()
        p.version += 1
        self.journal.wrote()
        return str(p.version)

    async def annotate_claim(self, name: str, patch: Mapping[str, str | None]) -> None:
        """Merge-patch a claim's annotations."""
        self.catch_up()
        claim = self.state.claim(name)
        _merge(claim.annotations, patch)
        claim.touch()
        self.journal.wrote()

    async def annotate_node(self, name: str, patch: Mapping[str, str | None]) -> None:
        """Merge-patch a node's annotations."""
        self.catch_up()
        node = self.state.node(name)
        _merge(node.annotations, patch)
        node.touch()
        self.journal.wrote()

    async def set_unschedulable(self, node: str, unschedulable: bool) -> None:
        """Cordon or uncordon a node."""
        self.catch_up()
        n = self.state.node(node)
        if n.unschedulable != unschedulable:
            n.unschedulable = unschedulable
            self.journal.notify("cordoned" if unschedulable else "uncordoned", n, self.clock.now())
            if not unschedulable:
                self.karpenter.schedule(self.clock.now())
        self.journal.wrote()

    async def create_placeholder(self, spec: PlaceholderSpec) -> None:
        """Create the placeholder Pod (kept if one of that name exists) and schedule it."""
        self.catch_up()
        now = self.clock.now()
        if (spec.namespace, spec.name) not in self.pods:
            pod = Pod(
                namespace=spec.namespace,
                name=spec.name,
                seq=next(self.state.seq),
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
            pod.attach(self.state.revisions)
            self.journal.record(
                now, "placeholder-created", spec.name, spec.pool, surge_for=spec.surge_for
            )
            self.karpenter.schedule(now)
        self.journal.wrote()

    async def delete_placeholder(self, namespace: str, name: str) -> None:
        """Delete a placeholder Pod (no-op when gone)."""
        self.catch_up()
        pod = self.pods.get((namespace, name))
        if pod is not None:
            self.karpenter.delete_pod(pod, self.clock.now(), "placeholder-deleted")
        self.journal.wrote()

    async def delete_claim(self, name: str) -> None:
        """Delete a claim: start its drain (no-op when already deleting or gone)."""
        self.catch_up()
        claim = self.claims.get(name)
        if claim is not None and claim.deleting_at is None:
            self.karpenter.start_deletion(claim, self.clock.now())
        self.journal.wrote()


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
