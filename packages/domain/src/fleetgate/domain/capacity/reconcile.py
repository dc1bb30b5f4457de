"""One reconcile pass's arithmetic: every counter recomputed from the placements, and the drift.

The placements are the ground truth. A pass

1. expires the claims whose ``expires_at`` has come (the sweep), moving their accounting back to
   the unclaimed pool exactly as a delete would;
2. recomputes each node's ``used_*`` (Σ of its placements) and ``expected_demand`` (Σ of what is
   left of each placement's demand charge, decaying linearly to zero over the decay window);
3. recomputes each active claim's ``used_*`` (Σ of its namespace's placements);
4. recomputes the cluster row: ``total`` = Σ node limits, ``claimed`` = Σ active claim limits,
   ``unclaimed_used`` = usage of namespaces without an active claim + Σ claim overage;
5. reports *drift*: recomputed − stored, signed, per dimension. The admission, release and claim
   transactions keep every counter exact, so any non-zero drift is a bug signal. The demand
   counter is not drift: it moves by design (admissions add, the pass decays).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from fleetgate.domain.capacity.accounting import share
from fleetgate.domain.capacity.claims import Claim, ClaimState, plan_release
from fleetgate.domain.capacity.demand import age_seconds, remaining
from fleetgate.domain.capacity.dimensions import ALLOCATION, Resources
from fleetgate.domain.capacity.model import ClusterState


@dataclass(frozen=True)
class Drift:
    """A signed difference per allocation dimension: recomputed minus stored."""

    cpus: int = 0
    memory_mb: int = 0
    disk_gb: int = 0

    @classmethod
    def between(cls, stored: Resources, recomputed: Resources) -> Drift:
        """``recomputed − stored`` per dimension."""
        return cls(*(recomputed.get(d) - stored.get(d) for d in ALLOCATION))

    def get(self, dimension: str) -> int:
        """The drift in ``dimension``."""
        if dimension not in ALLOCATION:
            raise ValueError(f"dimension: unknown allocation dimension {dimension!r}")
        value: int = getattr(self, dimension)
        return value

    def magnitude(self) -> Resources:
        """The absolute drift per dimension."""
        return Resources(*(abs(self.get(d)) for d in ALLOCATION))

    def is_zero(self) -> bool:
        """True when nothing drifted."""
        return all(self.get(d) == 0 for d in ALLOCATION)

    def as_dict(self) -> dict[str, int]:
        """``{"cpus": .., "memory_mb": .., "disk_gb": ..}``."""
        return {d: self.get(d) for d in ALLOCATION}


def _sum(values: Sequence[Resources]) -> Resources:
    # One Resources at the end, not one per addend: a pass sums 10,000 node limits.
    return Resources(*(sum(v.get(d) for v in values) for d in ALLOCATION))


# --- inputs -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeCounters:
    """A node row as the pass read it under lock."""

    name: str
    limits: Resources
    used: Resources
    expected_demand: float


@dataclass(frozen=True)
class DemandCharge:
    """A placement's demand charge, as made on ``node`` at ``admitted_at``."""

    node: str
    demand: float
    admitted_at: datetime


@dataclass(frozen=True)
class Snapshot:
    """Everything a pass reads, under the locks that keep admissions out until it commits.

    ``node_usage`` and ``namespace_usage`` are Σ placements grouped by node and by namespace;
    ``charges`` are the demand charges of placements young enough to still count (older ones
    contribute nothing, so the adapter need not read them); ``claims`` the stored-active claims.
    ``node_demand`` is what an adapter that evaluates the decay rule itself (the SQL ledger, in
    its GROUP BY) already summed per node at the pass's ``now``; a node's expected demand is that
    plus the decayed ``charges`` on it, so an adapter passes each charge one way or the other.
    """

    nodes: Sequence[NodeCounters]
    node_usage: Mapping[str, Resources]
    namespace_usage: Mapping[str, Resources]
    charges: Sequence[DemandCharge]
    claims: Sequence[Claim]
    cluster: ClusterState | None
    node_demand: Mapping[str, float] = field(default_factory=dict)
    #: Σ live room reservations per destination node (``capacity.reservations``): reserved room
    #: is charged to its node's counters, so a node's usage is its placements plus these.
    node_reserved: Mapping[str, Resources] = field(default_factory=dict)


# --- outputs ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeResult:
    """One node after the pass: its recomputed counters beside what was stored."""

    name: str
    limits: Resources
    used: Resources
    expected_demand: float
    stored_used: Resources
    stored_expected_demand: float

    @property
    def drift(self) -> Drift:
        """Recomputed minus stored ``used_*``."""
        return Drift.between(self.stored_used, self.used)

    @property
    def changed(self) -> bool:
        """Whether the stored row differs from the recomputed one: the rows a pass must write."""
        return self.used != self.stored_used or self.expected_demand != self.stored_expected_demand


@dataclass(frozen=True)
class ClaimResult:
    """One claim still active after the sweep: recomputed ``used_*`` beside what was stored."""

    id: str
    namespace: str
    limit: Resources
    used: Resources
    stored_used: Resources

    @property
    def drift(self) -> Drift:
        """Recomputed minus stored ``used_*``."""
        return Drift.between(self.stored_used, self.used)


@dataclass(frozen=True)
class ClusterResult:
    """The cluster row after the pass, beside the stored row (with the sweep already applied)."""

    total: Resources
    claimed: Resources
    unclaimed_used: Resources
    stored_total: Resources
    stored_claimed: Resources
    stored_unclaimed_used: Resources
    created: bool = False

    @property
    def drift(self) -> dict[str, Drift]:
        """Recomputed minus stored, for ``total``, ``claimed`` and ``unclaimed_used``."""
        return {
            "total": Drift.between(self.stored_total, self.total),
            "claimed": Drift.between(self.stored_claimed, self.claimed),
            "unclaimed_used": Drift.between(self.stored_unclaimed_used, self.unclaimed_used),
        }


@dataclass(frozen=True)
class Summary:
    """The pass in a line: what the operator's log, the metrics and ``--once`` show."""

    nodes: int
    drifted_nodes: int
    drift: Resources
    claims_expired: int
    drifted_claims: int
    cluster_drifted: bool
    duration_seconds: float
    reattributed: int = 0

    @property
    def clean(self) -> bool:
        """True when nothing at all had drifted."""
        return not (
            self.drifted_nodes or self.drifted_claims or self.cluster_drifted or self.reattributed
        )


@dataclass(frozen=True)
class Reconciliation:
    """The outcome of one pass: what to write, and what to report."""

    at: datetime
    nodes: tuple[NodeResult, ...]
    claims: tuple[ClaimResult, ...]
    expired: tuple[Claim, ...]
    cluster: ClusterResult
    #: namespace → the id of its active claim: whose side each placement is charged to.
    claim_of: Mapping[str, str] = field(default_factory=dict)

    def summary(self, duration_seconds: float = 0.0, reattributed: int = 0) -> Summary:
        """The summary line, with the pass's wall-clock duration and re-attributed placements."""
        drifted = [n for n in self.nodes if not n.drift.is_zero()]
        return Summary(
            nodes=len(self.nodes),
            drifted_nodes=len(drifted),
            drift=_sum([n.drift.magnitude() for n in drifted]),
            claims_expired=len(self.expired),
            drifted_claims=sum(1 for c in self.claims if not c.drift.is_zero()),
            cluster_drifted=any(not d.is_zero() for d in self.cluster.drift.values()),
            duration_seconds=duration_seconds,
            reattributed=reattributed,
        )


@dataclass(frozen=True)
class PassReport:
    """A finished pass as the ledger returns it: the reconciliation, its timing, and how many
    placements had to be pointed at their namespace's claim (``reattributed``: each one a
    release that would have credited the wrong side — drift in the making)."""

    reconciliation: Reconciliation
    duration_seconds: float
    reattributed: int = 0

    @property
    def summary(self) -> Summary:
        """The summary with this pass's duration."""
        return self.reconciliation.summary(self.duration_seconds, self.reattributed)


# --- the pass ---------------------------------------------------------------------------------


def expected_demand(charges: Sequence[DemandCharge], now: datetime, decay_seconds: float) -> float:
    """Σ what is left of each charge at ``now``: ``demand × max(0, 1 − age/decay)``."""
    return math.fsum(
        remaining(c.demand, age_seconds(c.admitted_at, now), decay_seconds) for c in charges
    )


def _sweep(snapshot: Snapshot, now: datetime) -> tuple[list[Claim], list[Claim], ClusterState]:
    """Split the claims into still-active and due, and apply the due ones' expiry to the row."""
    active: list[Claim] = []
    due: list[Claim] = []
    stored = snapshot.cluster or ClusterState(Resources(), Resources(), Resources(), now)
    for claim in sorted(snapshot.claims, key=lambda c: c.id):
        if claim.state is not ClaimState.ACTIVE:
            continue
        if claim.is_due(now):
            due.append(claim)
            change = plan_release(claim, stored)
            stored = ClusterState(stored.total, change.claimed, change.unclaimed_used, now)
        else:
            active.append(claim)
    return active, due, stored


def reconcile(snapshot: Snapshot, now: datetime, decay_seconds: float) -> Reconciliation:
    """Recompute every counter from ``snapshot`` at ``now`` and report the drift."""
    active, due, stored = _sweep(snapshot, now)
    by_node: dict[str, list[DemandCharge]] = {}
    for c in snapshot.charges:
        by_node.setdefault(c.node, []).append(c)
    nodes = tuple(
        NodeResult(
            name=n.name,
            limits=n.limits,
            used=snapshot.node_usage.get(n.name, Resources()).plus(
                snapshot.node_reserved.get(n.name, Resources())
            ),
            expected_demand=snapshot.node_demand.get(n.name, 0.0)
            + expected_demand(by_node.get(n.name, []), now, decay_seconds),
            stored_used=n.used,
            stored_expected_demand=n.expected_demand,
        )
        for n in sorted(snapshot.nodes, key=lambda n: n.name)
    )
    claims = tuple(
        ClaimResult(
            id=c.id,
            namespace=c.namespace,
            limit=c.limit,
            used=snapshot.namespace_usage.get(c.namespace, Resources()),
            stored_used=c.used,
        )
        for c in active
    )
    claimed_namespaces = {c.namespace for c in claims}
    shares = [share(c.limit, c.used, active=True) for c in claims] + [
        share(Resources(), used, active=False)
        for ns, used in snapshot.namespace_usage.items()
        if ns not in claimed_namespaces
    ]
    cluster = ClusterResult(
        total=_sum([n.limits for n in nodes]),
        claimed=_sum([s.claimed for s in shares]),
        unclaimed_used=_sum([s.unclaimed_used for s in shares]),
        stored_total=stored.total,
        stored_claimed=stored.claimed,
        stored_unclaimed_used=stored.unclaimed_used,
        created=snapshot.cluster is None,
    )
    return Reconciliation(
        at=now,
        nodes=nodes,
        claims=claims,
        expired=tuple(due),
        cluster=cluster,
        claim_of={c.namespace: c.id for c in claims},
    )


__all__ = [
    "ClaimResult",
    "ClusterResult",
    "DemandCharge",
    "Drift",
    "NodeCounters",
    "NodeResult",
    "PassReport",
    "Reconciliation",
    "Snapshot",
    "Summary",
    "expected_demand",
    "reconcile",
]
