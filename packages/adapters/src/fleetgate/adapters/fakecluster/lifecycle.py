"""Karpenter's side of the fake cluster: launching, draining and expiring NodeClaims.

A mixin of ``FakeCluster``: it works on the cluster's state (declared below) and is kept apart
so that the cluster module holds the public surface (seeding, faults, time, the gateway) and
this one the behaviour the controller reacts to.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from fleetgate.adapters.fakecluster import scheduler, tables
from fleetgate.adapters.fakecluster.faults import ControllerCrash, Faults
from fleetgate.adapters.fakecluster.model import (
    HOSTNAME_LABEL,
    NODEPOOL_LABEL,
    Claim,
    ClusterRecord,
    Node,
    NodeChange,
    Pod,
    Pool,
    Revisions,
    is_placeholder,
)
from fleetgate.adapters.fakecluster.pdb import DisruptionBudget, next_retry
from fleetgate.adapters.fakecluster.scheduler import BATCH
from fleetgate.domain.rotation.budgets import allowed, next_change, remaining
from fleetgate.domain.rotation.cluster import ObjectNotFound, Taint
from fleetgate.domain.rotation.disruption import DISRUPTED_TAINT, NODES

_ONE_NODE = 1000  # ``nodes`` in spec.limits / status.resources, in milli-units
BUDGET_RETRY = timedelta(minutes=10)
"""How soon the fake Karpenter looks again at a disruption its budgets held back only because
disruptions under way used them up (the real one re-evaluates every few seconds)."""


class KarpenterLifecycle:
    """NodeClaims being launched, drained and force-expired, on a queue of timed happenings."""

    clock: Any
    pools: dict[str, Pool]
    claims: tables.ClaimTable
    archive: dict[str, Claim]
    pods: tables.PodTable
    faults: Faults
    history: list[ClusterRecord]
    breaches: list[ClusterRecord]
    writes: int
    _queue: list[tuple[datetime, int, str, str]]
    _seq: itertools.count[int]
    _names: itertools.count[int]
    _listeners: list[Callable[[NodeChange], None]]
    _scheduling: bool
    _rerun: bool
    _revisions: Revisions
    _replacing: dict[str, str]
    pdbs: list[DisruptionBudget]
    _held: dict[str, datetime]  # claim -> its drain's first refused eviction, while a PDB holds it
    _retrying: set[str]  # held claims with an eviction retry queued
    _drain_due: set[str]  # held claims whose drain time has passed: they go once released
    _disruptions: dict[str, str]
    _budget_blocked: set[str]

    def pool_resources(self, pool: str) -> dict[str, int]:
        """``status.resources``: the summed allocatable of the pool's claims."""
        total: dict[str, int] = {}
        for claim in self.claims.of_pool.get(pool, {}).values():
            for name, value in claim.allocatable.items():
                total[name] = total.get(name, 0) + value
        return total

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
            used[NODES] = _ONE_NODE * self.claims.count_in(pool.name)
        adds = {**pool.node_allocatable, NODES: _ONE_NODE}
        for name, limit in sorted(pool.limits.items()):
            if used.get(name, 0) + adds.get(name, 0) > limit:
                return f"limits.{name}"
        return None

    def _keep_replicas(self, pool: Pool, at: datetime) -> None:
        """A static pool below ``spec.replicas`` gets new claims, within its limits.

        Called once a claim is gone and when the pool becomes Ready again. Karpenter's static
        provisioner counts deleting nodes with the running ones against ``spec.replicas``, so
        a deleted claim is replaced only after it left (break before make).
        """
        if pool.replicas is None or not pool.ready:
            return
        have = self.claims.count_in(pool.name)
        for _ in range(pool.replicas - have):
            if self.exceeded_limit(pool) is not None:
                return
            claim = self.provision(pool, at, batched=False)
            self._record(at, "static-replacement", claim.name, pool.name)

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
        claim.attach(self._revisions)
        self._record(created_at, "claim-created", name, pool.name)
        if expire_after is not None:
            self._at(created_at + expire_after, "expire", name)
        return claim

    def _launch(self, claim: Claim, at: datetime, *, ready: bool = True) -> None:
        node = Node(
            name=claim.name,
            pool=claim.pool,
            allocatable=dict(claim.allocatable),
            labels={**claim.labels, HOSTNAME_LABEL: claim.name},
            ready=False,
        )
        node.attach(self._revisions)
        claim.node = node
        self.pods.add_node(node)
        if ready:
            self._become_ready(claim, at)

    def _become_ready(self, claim: Claim, at: datetime) -> None:
        if claim.node is None:
            self._launch(claim, at, ready=False)
            assert claim.node is not None
        claim.ready = claim.node.ready = True
        self._record(at, "claim-ready", claim.name, claim.pool)
        self._notify("ready", claim.node, at)
        replaced = self.claims.get(self._replacing.pop(claim.name, ""))
        if replaced is not None and replaced.deleting_at is None:
            self._start_deletion(replaced, at)  # Karpenter's own replacement is up: break
        self._schedule(at)

    def provision(self, pool: Pool, at: datetime, *, batched: bool = True) -> Claim:
        """Launch a new claim for ``pool`` (Ready after its provisioning delay unless faulted;
        ``batched``: for a Pod that already waited out the batch window)."""
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
            batch = BATCH if batched else timedelta(0)
            self._at(at + max(pool.provisioning_delay - batch, timedelta(0)), "launch", claim.name)
        return claim

    def _disrupt(self, claim: Claim, reason: str, at: datetime) -> None:
        """Karpenter's own disruption of ``claim`` (see ``FakeCluster.disrupt_at``), once the
        pool's budgets for ``reason`` allow it."""
        if claim.deleting_at is not None or claim.disruption_reason is not None:
            return  # already going, or already being replaced
        pool = self.pools[claim.pool]
        total, disrupting = self._budget_counts(pool.name)
        if remaining(pool.budgets, at, total, disrupting, reason) == 0:
            # Karpenter leaves it for a later pass: when a scheduled budget changes, or (when
            # disruptions under way used the budget up) at its next look.
            by_value = allowed(pool.budgets, at, total, reason) == 0
            retry = next_change(pool.budgets, at) if by_value else at + BUDGET_RETRY
            if claim.name not in self._budget_blocked:
                self._budget_blocked.add(claim.name)
                self._record(
                    at, "karpenter-disruption-blocked", claim.name, pool.name, reason=reason
                )
            if retry is not None:
                self._disruptions[claim.name] = reason
                self._at(retry, "disrupt", claim.name)
            return
        self._budget_blocked.discard(claim.name)
        claim.disruption_reason = reason
        if claim.node is not None:
            claim.node.taints = (*claim.node.taints, Taint(DISRUPTED_TAINT, "", "NoSchedule"))
        replacement = self.provision(self.pools[claim.pool], at, batched=False)
        self._replacing[replacement.name] = claim.name
        self._record(at, "karpenter-disrupting", claim.name, claim.pool, reason=reason)

    def _budget_counts(self, pool: str) -> tuple[int, int]:
        """The pool's initialized nodes and those disrupting, as ``budget_counts`` counts them."""
        total = disrupting = 0
        for claim in self.claims.of_pool.get(pool, {}).values():
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
            on_node = self.pods.bound.get(claim.node.name, {}).values()
            for pod in sorted(on_node, key=lambda p: p.seq):
                if pod.node_name == claim.node.name and pod.owner_kind is None:
                    self._delete_pod(
                        pod, at, "placeholder-deleted" if is_placeholder(pod) else "pod-deleted"
                    )
            held = self._evict(claim, at)
            if held:
                # A PodDisruptionBudget refuses: Karpenter retries with backoff and, once the
                # claim's terminationGracePeriod runs out, deletes what is left (drain-deadline).
                self._held[claim.name] = at
                self._record(at, "eviction-blocked", claim.name, claim.pool, pods=held)
                if tgp is not None:
                    self._at(at + tgp, "drain-deadline", claim.name)
        self._schedule(at)

    def _evict(self, claim: Claim, at: datetime) -> str:
        """Evict the workload Pods on ``claim``'s Node through the Eviction API's rules; return
        the names of those a PodDisruptionBudget holds (comma-separated, "" when none)."""
        assert claim.node is not None
        held = []
        on_node = self.pods.bound.get(claim.node.name, {}).values()
        for pod in sorted(on_node, key=lambda p: p.seq):
            if pod.node_name != claim.node.name or pod.owner_kind in (None, "DaemonSet"):
                continue
            if self._budget_holds(pod):
                held.append(pod.name)
            else:
                pod.node_name = None  # its owner recreates it: Pending, to be scheduled anew
                pod.pending_since = at
        return ",".join(held)

    def _budget_holds(self, pod: Pod) -> bool:
        """Whether the Eviction API would answer 429 for ``pod`` now (no budget: never)."""
        if not self.pdbs:
            return False
        guarding = [b for b in self.pdbs if b.selects(pod.namespace, pod.labels)]
        if not guarding:
            return False
        if len(guarding) > 1:
            return (
                True  # the API server refuses to evict a Pod under two budgets: Karpenter retries
            )
        budget = guarding[0]
        guarded = [
            self._healthy(p) for p in self.pods.values() if budget.selects(p.namespace, p.labels)
        ]
        return not budget.lets_go(self._healthy(pod), guarded)

    def _healthy(self, pod: Pod) -> bool:
        """A Pod counts as healthy for a budget while it runs on a Ready node."""
        if pod.node_name is None:
            return False
        claim = self.claims.get(pod.node_name)
        return claim is not None and claim.ready

    def _recheck_held(self, at: datetime) -> None:
        """Queue Karpenter's next eviction retry for each held drain that a retry could now
        release (the budget's Pods changed); a retry bound to be refused changes nothing."""
        for name, first in self._held.items():
            claim = self.claims.get(name)
            if name in self._retrying or claim is None or claim.node is None:
                continue
            on_node = self.pods.bound.get(claim.node.name, {}).values()
            if any(
                p.node_name == claim.node.name
                and p.owner_kind not in (None, "DaemonSet")
                and not self._budget_holds(p)
                for p in on_node
            ):
                self._retrying.add(name)
                self._at(next_retry(first, at), "evict", name)

    def _retry_evictions(self, claim: Claim, at: datetime) -> None:
        """Karpenter's retry fired: evict again; the drain ends once nothing is held and its
        own time has passed (the ``drained`` happening waited for this)."""
        self._retrying.discard(claim.name)
        if claim.node is not None and self._evict(claim, at):
            self._schedule(at)
            return
        del self._held[claim.name]
        self._record(at, "eviction-done", claim.name, claim.pool)
        if claim.name in self._drain_due:
            self._drain_due.discard(claim.name)
            self._remove_claim(claim, at)
        else:
            self._schedule(at)

    def _drained(self, claim: Claim, at: datetime) -> None:
        """The drain's own time has passed: the claim goes, unless a budget still holds a Pod."""
        if claim.name in self._held:
            self._drain_due.add(claim.name)
            return
        self._remove_claim(claim, at)

    def _drain_deadline(self, claim: Claim, at: datetime) -> None:
        """terminationGracePeriod ran out with Pods still held: Karpenter deletes them anyway."""
        if claim.name not in self._held:
            return
        del self._held[claim.name]
        self._drain_due.discard(claim.name)
        self._retrying.discard(claim.name)
        if claim.node is not None:
            for pod in list(self.pods.bound.get(claim.node.name, {}).values()):
                if pod.node_name == claim.node.name and pod.owner_kind not in (None, "DaemonSet"):
                    pod.node_name = None
                    pod.pending_since = at
        self._record(at, "drain-forced", claim.name, claim.pool)
        self._remove_claim(claim, at)

    def _force_expire(self, claim: Claim, at: datetime) -> None:
        if claim.deleting_at is None:
            record = self._record(at, "claim-expired", claim.name, claim.pool)
            self.breaches.append(record)
            self._start_deletion(claim, at)

    def _remove_claim(self, claim: Claim, at: datetime) -> None:
        del self.claims[claim.name]
        self._held.pop(claim.name, None)
        self._drain_due.discard(claim.name)
        self._retrying.discard(claim.name)
        if claim.node is not None:
            self.pods.drop_node(claim.node.name)
        self._revisions.left("claims", claim)
        if claim.node is not None:
            for pod in list(self.pods.bound.get(claim.node.name, {}).values()):
                if pod.node_name == claim.node.name:
                    if pod.owner_kind in (None, "DaemonSet"):
                        del self.pods[pod.key]
                        self._revisions.left(pod._kind(), pod)
                    else:
                        pod.node_name = None
                        pod.pending_since = at
            self._notify("removed", claim.node, at)
        for pod in self.pods.nominated_to(claim.name):
            pod.nominated_claim = None
        self._record(at, "claim-removed", claim.name, claim.pool)
        self._keep_replicas(self.pools[claim.pool], at)
        self._schedule(at)

    def _schedule(self, at: datetime) -> None:
        scheduler.schedule(self, at)
        if self._held and not self._scheduling:
            self._recheck_held(at)

    # --- helpers -----------------------------------------------------------------------------

    def _delete_pod(self, pod: Pod, at: datetime, kind: str) -> None:
        del self.pods[pod.key]
        self._revisions.left(pod._kind(), pod)
        if is_placeholder(pod):
            self._record(at, kind, pod.name, pod.pool or "")
            self._schedule(at)

    def _placeholders(self, pool: str | None) -> list[Pod]:
        return self.pods.placeholders_of(pool)

    def _at(self, at: datetime, kind: str, name: str) -> None:
        heapq.heappush(self._queue, (at, next(self._seq), kind, name))

    def _still_due(self, item: tuple[datetime, int, str, str]) -> bool:
        _, _, kind, name = item
        if kind == "batch":
            return name in self.pods.pending_in
        claim = self.claims.get(name)
        if claim is None:
            return False
        if kind == "launch":
            return not claim.ready and claim.deleting_at is None
        if kind in ("expire", "disrupt"):
            return claim.deleting_at is None
        if kind in ("evict", "drain-deadline"):
            return name in self._held
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
