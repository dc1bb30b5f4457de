"""Karpenter's side of the fake cluster: launching, draining and expiring NodeClaims.

A room of ``FakeCluster``: it works on the cluster's records (``state``), writes what happens to
the ``journal``, queues what takes time on the ``timeline`` and applies it when it falls due
(``happen``), and places Pending Pods through its ``scheduler``. The cluster module holds the
public surface (seeding, faults, time, the gateway) and delegates the behaviour the controller
reacts to here.

A drain follows Karpenter's terminator (kubernetes-sigs/karpenter 2266468,
``pkg/controllers/node/termination/terminator/eviction.go``): a workload Pod is evicted unless a
PodDisruptionBudget refuses (``pdb``) or its ``karpenter.sh/do-not-disrupt`` is active (Karpenter
does not evict it, ``IsEvictable``); a held Pod is retried on Karpenter's backoff, and once the
claim's deadline (deletion + ``terminationGracePeriod``) less the Pod's own grace period has
passed it is deleted regardless (``needsForceDelete``); the claim then goes at its deadline, when
the forced Pods' clamped grace periods have run out.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import datetime, timedelta

from fleetgate.adapters.fakecluster.journal import Journal
from fleetgate.adapters.fakecluster.model import (
    HOSTNAME_LABEL,
    NODEPOOL_LABEL,
    Claim,
    Node,
    Pod,
    Pool,
    is_placeholder,
)
from fleetgate.adapters.fakecluster.pdb import next_retry
from fleetgate.adapters.fakecluster.scheduler import BATCH, Scheduler
from fleetgate.adapters.fakecluster.state import ClusterState
from fleetgate.adapters.fakecluster.timeline import Timeline
from fleetgate.domain.rotation.annotations import KARPENTER_DO_NOT_DISRUPT
from fleetgate.domain.rotation.budgets import allowed, next_change, remaining
from fleetgate.domain.rotation.cluster import Taint
from fleetgate.domain.rotation.disruption import (
    DISRUPTED_TAINT,
    NODES,
    opt_out_expiry,
    pod_opt_out_active,
)

_ONE_NODE = 1000  # ``nodes`` in spec.limits / status.resources, in milli-units
BUDGET_RETRY = timedelta(minutes=10)
"""How soon the fake Karpenter looks again at a disruption its budgets held back only because
disruptions under way used them up (the real one re-evaluates every few seconds)."""


class KarpenterLifecycle:
    """NodeClaims being launched, drained and force-expired, on a queue of timed happenings."""

    def __init__(
        self,
        state: ClusterState,
        journal: Journal,
        timeline: Timeline,
        pool_resources: Callable[[str], dict[str, int]],
    ) -> None:
        self.state = state
        self.journal = journal
        self.timeline = timeline
        #: ``status.resources`` of a pool: the summed allocatable of its claims.
        self.pool_resources = pool_resources
        self.scheduler = Scheduler(self)
        self._names = itertools.count(1)
        self._replacing: dict[str, str] = {}  # Karpenter's replacement -> the claim it replaces
        self._disruptions: dict[str, str] = {}  # claim -> reason, for a queued ``disrupt``
        self._budget_blocked: set[str] = set()  # claims whose disruption budgets hold back
        # claim -> its drain's first refused eviction, while a PodDisruptionBudget or a Pod's
        # do-not-disrupt holds it
        self._held: dict[str, datetime] = {}
        self._retrying: set[str] = set()  # held claims with an eviction retry queued
        self._drain_due: set[str] = set()  # held claims whose drain time has passed
        self._forced: set[str] = set()  # claims some Pod of which was force-deleted

    def refuses_to_provision(self, pool: Pool) -> str | None:
        """Why Karpenter launches nothing for a pending Pod of ``pool`` (None: it may).

        A static pool keeps its replica count whatever is pending; a pool whose Ready
        condition is not True is left out of scheduling altogether.
        """
        if pool.replicas is not None:
            return (
                f"NodePool {pool.name} is static (spec.replicas {pool.replicas}): "
                "Karpenter does not provision for pending Pods"
            )
        if not pool.ready:
            return f"NodePool {pool.name} is not Ready: Karpenter provisions nothing from it"
        return None

    def exceeded_limit(self, pool: Pool) -> str | None:
        """The ``spec.limits`` entry one more node of ``pool`` would exceed (None: none).

        Karpenter refuses a NodeClaim that would take ``status.resources`` past a limit;
        ``nodes`` counts the pool's claims (milli-units, as the observation reports it).
        """
        if not pool.limits:
            return None
        used = self.pool_resources(pool.name)
        if NODES in pool.limits:
            used[NODES] = _ONE_NODE * self.state.claims.count_in(pool.name)
        adds = {**pool.node_allocatable, NODES: _ONE_NODE}
        for name, limit in sorted(pool.limits.items()):
            if used.get(name, 0) + adds.get(name, 0) > limit:
                return f"limits.{name}"
        return None

    def keep_replicas(self, pool: Pool, at: datetime) -> None:
        """A static pool below ``spec.replicas`` gets new claims, within its limits.

        Called once a claim is gone and when the pool becomes Ready again. Karpenter's static
        provisioner counts deleting nodes with the running ones against ``spec.replicas``, so
        a deleted claim is replaced only after it left (break before make).
        """
        if pool.replicas is None or not pool.ready:
            return
        have = self.state.claims.count_in(pool.name)
        for _ in range(pool.replicas - have):
            if self.exceeded_limit(pool) is not None:
                return
            claim = self.provision(pool, at, batched=False)
            self.journal.record(at, "static-replacement", claim.name, pool.name)

    # --- Karpenter's behaviour ---------------------------------------------------------------

    def new_claim(
        self,
        pool: Pool,
        name: str,
        created_at: datetime,
        expire_after: timedelta | None,
        tgp: timedelta | None,
        allocatable: dict[str, int],
    ) -> Claim:
        if name in self.state.claims:
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
        self.state.claims[name] = claim
        self.state.archive[name] = claim
        claim.attach(self.state.revisions)
        self.journal.record(created_at, "claim-created", name, pool.name)
        if expire_after is not None:
            self.timeline.at(created_at + expire_after, "expire", name)
        return claim

    def launch(self, claim: Claim, at: datetime, *, ready: bool = True) -> None:
        node = Node(
            name=claim.name,
            pool=claim.pool,
            allocatable=dict(claim.allocatable),
            labels={**claim.labels, HOSTNAME_LABEL: claim.name},
            ready=False,
        )
        node.attach(self.state.revisions)
        claim.node = node
        self.state.pods.add_node(node)
        if ready:
            self.become_ready(claim, at)

    def become_ready(self, claim: Claim, at: datetime) -> None:
        if claim.node is None:
            self.launch(claim, at, ready=False)
            assert claim.node is not None
        claim.ready = claim.node.ready = True
        self.journal.record(at, "claim-ready", claim.name, claim.pool)
        self.journal.notify("ready", claim.node, at)
        replaced = self.state.claims.get(self._replacing.pop(claim.name, ""))
        if replaced is not None and replaced.deleting_at is None:
            self.start_deletion(replaced, at)  # Karpenter's own replacement is up: break
        self.schedule(at)

    def provision(self, pool: Pool, at: datetime, *, batched: bool = True) -> Claim:
        """Launch a new claim for ``pool`` (Ready after its provisioning delay unless faulted;
        ``batched``: for a Pod that already waited out the batch window)."""
        claim = self.new_claim(
            pool,
            self.next_name(pool.name),
            at,
            pool.expire_after,
            pool.termination_grace_period,
            dict(pool.node_allocatable),
        )
        if pool.name not in self.state.faults.provisioning_never_completes:
            # The pool's delay runs from the Pod going Pending; the batch window is part of it.
            batch = BATCH if batched else timedelta(0)
            self.timeline.at(
                at + max(pool.provisioning_delay - batch, timedelta(0)), "launch", claim.name
            )
        return claim

    def disrupt(self, claim: Claim, reason: str, at: datetime) -> None:
        """Karpenter's own disruption of ``claim`` (see ``FakeCluster.disrupt_at``), once the
        pool's budgets for ``reason`` allow it."""
        if claim.deleting_at is not None or claim.disruption_reason is not None:
            return  # already going, or already being replaced
        pool = self.state.pools[claim.pool]
        total, disrupting = self._budget_counts(pool.name)
        if remaining(pool.budgets, at, total, disrupting, reason) == 0:
            # Karpenter leaves it for a later pass: when a scheduled budget changes, or (when
            # disruptions under way used the budget up) at its next look.
            by_value = allowed(pool.budgets, at, total, reason) == 0
            retry = next_change(pool.budgets, at) if by_value else at + BUDGET_RETRY
            if claim.name not in self._budget_blocked:
                self._budget_blocked.add(claim.name)
                self.journal.record(
                    at, "karpenter-disruption-blocked", claim.name, pool.name, reason=reason
                )
            if retry is not None:
                self._disruptions[claim.name] = reason
                self.timeline.at(retry, "disrupt", claim.name)
            return
        self._budget_blocked.discard(claim.name)
        claim.disruption_reason = reason
        if claim.node is not None:
            claim.node.taints = (*claim.node.taints, Taint(DISRUPTED_TAINT, "", "NoSchedule"))
        replacement = self.provision(self.state.pools[claim.pool], at, batched=False)
        self._replacing[replacement.name] = claim.name
        self.journal.record(at, "karpenter-disrupting", claim.name, claim.pool, reason=reason)

    def _budget_counts(self, pool: str) -> tuple[int, int]:
        """The pool's initialized nodes and those disrupting, as ``budget_counts`` counts them."""
        total = disrupting = 0
        for claim in self.state.claims.of_pool.get(pool, {}).values():
            if not claim.ready:
                continue
            total += 1
            node = claim.node
            sick = node is not None and (
                not node.ready or any(t.key == DISRUPTED_TAINT for t in node.taints)
            )
            if claim.deleting_at is not None or claim.disruption_reason is not None or sick:
                disrupting += 1
        return total, disrupting

    def start_deletion(self, claim: Claim, at: datetime) -> None:
        claim.deleting_at = at
        self.journal.record(at, "claim-deleting", claim.name, claim.pool)
        pool = self.state.pools[claim.pool]
        stuck = (
            claim.name in self.state.faults.stuck_drains
            or claim.pool in self.state.faults.stuck_drain_pools
        )
        drain = None if stuck else pool.drain_time
        tgp = claim.termination_grace_period
        bound = [d for d in (drain, tgp) if d is not None]
        if claim.node is None:
            bound = [timedelta(0)]  # nothing to drain
        if claim.name in self.state.faults.stuck_forever:
            bound = []
        if bound:
            self.timeline.at(at + min(bound), "drained", claim.name)
        if claim.node is not None:
            on_node = self.state.pods.bound.get(claim.node.name, {}).values()
            for pod in sorted(on_node, key=lambda p: p.seq):
                if pod.node_name == claim.node.name and pod.owner_kind is None:
                    self.delete_pod(
                        pod, at, "placeholder-deleted" if is_placeholder(pod) else "pod-deleted"
                    )
            held = self._evict(claim, at)
            if held:
                # A PodDisruptionBudget refuses, or do-not-disrupt holds: Karpenter retries with
                # backoff and, as the claim's terminationGracePeriod runs out, deletes what is
                # left (``force``), the claim going at the deadline (``drain-deadline``).
                self._held[claim.name] = at
                self.journal.record(at, "eviction-blocked", claim.name, claim.pool, pods=held)
                self._retry_at_opt_out_expiry(claim, at)
                if tgp is not None:
                    self.timeline.at(at + tgp, "drain-deadline", claim.name)
                    self._queue_force(claim, at)
        self.schedule(at)

    def _evict(self, claim: Claim, at: datetime) -> str:
        """Evict the workload Pods on ``claim``'s Node through the Eviction API's rules; return
        the names of those a PodDisruptionBudget holds (comma-separated, "" when none)."""
        assert claim.node is not None
        held = []
        on_node = self.state.pods.bound.get(claim.node.name, {}).values()
        for pod in sorted(on_node, key=lambda p: p.seq):
            if pod.node_name != claim.node.name or pod.owner_kind in (None, "DaemonSet"):
                continue
            if self._holds(pod, at):
                held.append(pod.name)
            else:
                pod.node_name = None  # its owner recreates it: Pending, to be scheduled anew
                pod.pending_since = at
        return ",".join(held)

    def _holds(self, pod: Pod, at: datetime) -> bool:
        """Whether Karpenter leaves ``pod`` where it is for now: its do-not-disrupt is active
        (it does not even try), or the Eviction API would answer 429."""
        opted_out = KARPENTER_DO_NOT_DISRUPT in pod.annotations and pod_opt_out_active(
            pod.view(), at
        )
        return opted_out or self._budget_holds(pod)

    def _held_pods(self, claim: Claim, at: datetime) -> list[Pod]:
        """The workload Pods on ``claim``'s Node that Karpenter cannot evict at ``at``."""
        if claim.node is None:
            return []
        on_node = self.state.pods.bound.get(claim.node.name, {}).values()
        return [
            p
            for p in sorted(on_node, key=lambda p: p.seq)
            if p.node_name == claim.node.name
            and p.owner_kind not in (None, "DaemonSet")
            and self._holds(p, at)
        ]

    def _force_at(self, claim: Claim, pod: Pod) -> datetime:
        """When Karpenter force-deletes held ``pod``: the claim's deadline less the Pod's grace
        period (at once when that is already past)."""
        assert claim.deleting_at is not None and claim.termination_grace_period is not None
        deadline = claim.deleting_at + claim.termination_grace_period
        return max(claim.deleting_at, deadline - pod.termination_grace_period)

    def _queue_force(self, claim: Claim, at: datetime) -> None:
        """Queue the next force-deletion among ``claim``'s held Pods (none left: nothing)."""
        times = [self._force_at(claim, p) for p in self._held_pods(claim, at)]
        if times:
            self.timeline.at(max(min(times), at), "force", claim.name)

    def _retry_at_opt_out_expiry(self, claim: Claim, at: datetime) -> None:
        """A duration opt-out that runs out frees its Pod: Karpenter's next retry after that
        evicts it (nothing else changes in the cluster to prompt a look)."""
        held = self._held_pods(claim, at)
        ends = opt_out_expiry([p.view() for p in held], at)
        if ends is not None and claim.name in self._held:
            self.timeline.at(next_retry(self._held[claim.name], ends), "evict", claim.name)

    def _force(self, claim: Claim, at: datetime) -> None:
        """Karpenter deletes the held Pods whose grace period would run past the deadline,
        bypassing budgets and opt-outs; their owners recreate them (Pending). The claim stays
        until its deadline, while their clamped grace periods run out."""
        forced = [p for p in self._held_pods(claim, at) if self._force_at(claim, p) <= at]
        for pod in forced:
            pod.node_name = None
            pod.pending_since = at
        if forced:
            if claim.name not in self._forced:
                self.journal.record(at, "drain-forced", claim.name, claim.pool)
            self._forced.add(claim.name)
        self._queue_force(claim, at)
        self.schedule(at)

    def _budget_holds(self, pod: Pod) -> bool:
        """Whether the Eviction API would answer 429 for ``pod`` now (no budget: never)."""
        if not self.state.pdbs:
            return False
        guarding = [b for b in self.state.pdbs if b.selects(pod.namespace, pod.labels)]
        if not guarding:
            return False
        if len(guarding) > 1:
            return (
                True  # the API server refuses to evict a Pod under two budgets: Karpenter retries
            )
        budget = guarding[0]
        guarded = [
            self._healthy(p)
            for p in self.state.pods.values()
            if budget.selects(p.namespace, p.labels)
        ]
        return not budget.lets_go(self._healthy(pod), guarded)

    def _healthy(self, pod: Pod) -> bool:
        """A Pod counts as healthy for a budget while it runs on a Ready node."""
        if pod.node_name is None:
            return False
        claim = self.state.claims.get(pod.node_name)
        return claim is not None and claim.ready

    def recheck_held(self, at: datetime) -> None:
        """Queue Karpenter's next eviction retry for each held drain that a retry could now
        release (the budget's Pods changed); a retry bound to be refused changes nothing."""
        for name, first in self._held.items():
            claim = self.state.claims.get(name)
            if name in self._retrying or claim is None or claim.node is None:
                continue
            on_node = self.state.pods.bound.get(claim.node.name, {}).values()
            if any(
                p.node_name == claim.node.name
                and p.owner_kind not in (None, "DaemonSet")
                and not self._holds(p, at)
                for p in on_node
            ):
                self._retrying.add(name)
                self.timeline.at(next_retry(first, at), "evict", name)

    def _retry_evictions(self, claim: Claim, at: datetime) -> None:
        """Karpenter's retry fired: evict again; the drain ends once nothing is held and its
        own time has passed (the ``drained`` happening waited for this)."""
        self._retrying.discard(claim.name)
        if claim.node is not None and self._evict(claim, at):
            self._retry_at_opt_out_expiry(claim, at)
            self.schedule(at)
            return
        del self._held[claim.name]
        self.journal.record(at, "eviction-done", claim.name, claim.pool)
        if claim.name in self._forced:
            self.schedule(at)  # forced Pods are still terminating: the claim goes at its deadline
        elif claim.name in self._drain_due:
            self._drain_due.discard(claim.name)
            self.remove_claim(claim, at)
        else:
            self.schedule(at)

    def _drained(self, claim: Claim, at: datetime) -> None:
        """The drain's own time has passed: the claim goes, unless a Pod is still held (or a
        forced one is still terminating)."""
        if claim.name in self._held or claim.name in self._forced:
            self._drain_due.add(claim.name)
            return
        self.remove_claim(claim, at)

    def _drain_deadline(self, claim: Claim, at: datetime) -> None:
        """terminationGracePeriod ran out: whatever is still held is forced now (a Pod whose
        grace period is 0), and a claim that had to force anything goes."""
        if claim.name not in self._held and claim.name not in self._forced:
            return
        self._force(claim, at)
        self.remove_claim(claim, at)

    def _force_expire(self, claim: Claim, at: datetime) -> None:
        if claim.deleting_at is None:
            record = self.journal.record(at, "claim-expired", claim.name, claim.pool)
            self.journal.breaches.append(record)
            self.start_deletion(claim, at)

    def remove_claim(self, claim: Claim, at: datetime) -> None:
        del self.state.claims[claim.name]
        self._held.pop(claim.name, None)
        self._drain_due.discard(claim.name)
        self._retrying.discard(claim.name)
        self._forced.discard(claim.name)
        if claim.node is not None:
            self.state.pods.drop_node(claim.node.name)
        self.state.revisions.left("claims", claim)
        if claim.node is not None:
            for pod in list(self.state.pods.bound.get(claim.node.name, {}).values()):
                if pod.node_name == claim.node.name:
                    if pod.owner_kind in (None, "DaemonSet"):
                        del self.state.pods[pod.key]
                        self.state.revisions.left(pod._kind(), pod)
                    else:
                        pod.node_name = None
                        pod.pending_since = at
            self.journal.notify("removed", claim.node, at)
        for pod in self.state.pods.nominated_to(claim.name):
            pod.nominated_claim = None
        self.journal.record(at, "claim-removed", claim.name, claim.pool)
        self.keep_replicas(self.state.pools[claim.pool], at)
        self.schedule(at)

    def schedule(self, at: datetime) -> None:
        """Place the Pending Pods; then look again at drains a budget holds (their Pods moved)."""
        self.scheduler.schedule(at)
        if self._held and not self.scheduler.running:
            self.recheck_held(at)

    def happen(self, kind: str, name: str, at: datetime) -> None:
        """Apply the happening ``kind`` of ``name`` that fell due at ``at``."""
        if kind == "batch":
            self.schedule(at)
            return
        claim = self.state.claims[name]
        if kind == "launch":
            self.become_ready(claim, at)
        elif kind == "drained":
            self._drained(claim, at)
        elif kind == "evict":
            self._retry_evictions(claim, at)
        elif kind == "force":
            self._force(claim, at)
        elif kind == "drain-deadline":
            self._drain_deadline(claim, at)
        elif kind == "expire":
            self._force_expire(claim, at)
        elif kind == "disrupt":
            self.disrupt(claim, self._disruptions.pop(name, "Underutilized"), at)

    def disrupt_at(self, claim: str, at: datetime, reason: str) -> None:
        """Queue Karpenter's own disruption of ``claim`` at ``at`` (see ``disrupt``)."""
        self._disruptions[claim] = reason
        self.timeline.at(at, "disrupt", claim)

    def still_due(self, kind: str, name: str) -> bool:
        """Whether a queued happening still applies (its claim still there and in that state)."""
        if kind == "batch":
            return name in self.state.pods.pending_in
        claim = self.state.claims.get(name)
        if claim is None:
            return False
        if kind == "launch":
            return not claim.ready and claim.deleting_at is None
        if kind in ("expire", "disrupt"):
            return claim.deleting_at is None
        if kind in ("evict", "force"):
            return name in self._held
        if kind == "drain-deadline":
            return name in self._held or name in self._forced
        return True

    def node_ready_changed(self, at: datetime) -> None:
        """A Node's Ready condition flipped: its Pods' health counts in PodDisruptionBudgets."""
        if self._held:
            self.recheck_held(at)

    # --- helpers -----------------------------------------------------------------------------

    def delete_pod(self, pod: Pod, at: datetime, kind: str) -> None:
        """Delete ``pod``; a placeholder's deletion is recorded and leaves room to schedule."""
        del self.state.pods[pod.key]
        self.state.revisions.left(pod._kind(), pod)
        if is_placeholder(pod):
            self.journal.record(at, kind, pod.name, pod.pool or "")
            self.schedule(at)

    def next_name(self, pool: str) -> str:
        """A fresh claim name in ``pool``."""
        while True:
            name = f"{pool}-{next(self._names):04d}"
            if name not in self.state.claims:
                return name
