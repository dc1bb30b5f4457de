"""Would a whole node's placements find room elsewhere? The judgement behind the ledger gate.

A rotation drains a node; with the node sync on, every placement the ledger holds there is then
relocated (``services.nodesync``): each one walks the schedulable nodes but its own, demand
clause first and one waiver pass, and each try is one guarded ``move`` that charges the target
node only. :func:`judge` replays exactly that over a snapshot, in Python, with the same guards
(``guards.node_guard``, evaluated by ``denials.deny``) and the same walk (``walk.Walk``), charging
each simulated move to its target before the next placement walks, so two placements never count
on the same room. It writes nothing.

What a move leaves alone, the judgement leaves alone: a move changes neither the namespace's
usage nor its claim (hard or advisory) nor the cluster's unclaimed usage, so the claim and cluster
guards cannot refuse a relocation. What the rotation *does* change on the namespace side is the
cluster total (``Σ node limits``): the drained node's limits leave it and the surge node's join
it. The judgement therefore also checks that every active claim and the unclaimed usage still fit
the total the rotation leaves, in each dimension the rotation lowers (a dimension it does not
lower is never refused, as for claim changes, capacity spec 6.3).

The surge node is the rotation's replacement. Karpenter picks its instance type only at launch,
so it is assumed to offer, per dimension, the least any ledger node of the pool offers (the
drained node included): a pool of one shape gets its own shape, a mixed pool is judged on its
smallest. It publishes no metrics yet, so the demand clause, which ignores a node without
``cpu_schedulable``, never refuses it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from random import Random

from fleetgate.domain.capacity.demand import DemandPolicy, charge
from fleetgate.domain.capacity.denials import Denial, deny
from fleetgate.domain.capacity.dimensions import ALLOCATION, Resources
from fleetgate.domain.capacity.guards import node_guard
from fleetgate.domain.capacity.model import ClusterState, NodeMetrics, NodeState, Placement
from fleetgate.domain.capacity.ranking import eligible, rank
from fleetgate.domain.capacity.walk import Walk

SURGE_SUFFIX = "~surge"
"""Appended to the drained node's name to name its (not yet existing) replacement: ``~`` is not
allowed in a node name, so the stand-in can never collide with a real node."""


@dataclass(frozen=True)
class Snapshot:
    """What the judgement reads: every ledger node, the cluster row, the node's placements."""

    node: str
    nodes: tuple[NodeState, ...]
    cluster: ClusterState | None
    placements: tuple[Placement, ...]


@dataclass(frozen=True)
class Verdict:
    """Whether every placement of ``node`` would find a new node, and what is missing if not.

    ``stranded`` are the placements no candidate would take (ids, in the order they walk).
    ``missing`` is, per allocation dimension, how much the stranded placements need beyond all
    the free room the candidates would have left: all zero while some stay stranded means the
    room exists but no single node has enough of it (add a node, or raise a node's limits).
    ``cluster_missing`` is how far, per dimension, the claims and unclaimed usage would exceed
    the cluster total once the node is gone and its replacement has joined.
    ``targets`` maps each placement that would move to the node it would land on.
    """

    node: str
    placements: int
    stranded: tuple[str, ...] = ()
    missing: Resources = field(default_factory=Resources)
    cluster_missing: Resources = field(default_factory=Resources)
    targets: tuple[tuple[str, str], ...] = ()

    @property
    def fits(self) -> bool:
        """True when every placement would move and the claims still fit the cluster."""
        return not self.stranded and self.cluster_missing.is_zero()

    def shortfall(self) -> Resources:
        """The larger of the two shortfalls, per dimension (what an operator must find)."""
        return Resources(
            *(max(self.missing.get(d), self.cluster_missing.get(d)) for d in ALLOCATION)
        )

    def as_dict(self) -> dict[str, object]:
        """The wire form (status, events, reports)."""
        return {
            "node": self.node,
            "placements": self.placements,
            "fits": self.fits,
            "stranded": len(self.stranded),
            "missing": self.shortfall().as_dict(),
        }


def surge_for(source: NodeState, nodes: Sequence[NodeState] = ()) -> NodeState:
    """The replacement a rotation of ``source`` brings: the least limits of its pool's nodes
    (``source`` among them), nothing used, no metrics."""
    pool = [source, *(n for n in nodes if n.pool == source.pool)]
    least = Resources(*(min(n.limits.get(d) for n in pool) for d in ALLOCATION))
    return replace(
        source,
        name=source.name + SURGE_SUFFIX,
        limits=least,
        used=Resources(),
        expected_demand=0.0,
        metrics=NodeMetrics(),
        schedulable=True,
        metrics_at=None,
    )


def _free(node: NodeState) -> Resources:
    return node.limits.minus_floored(node.used)


def _walk_one(
    placement: Placement,
    nodes: dict[str, NodeState],
    order: Sequence[str],
    policy: DemandPolicy,
) -> str | None:
    """The node ``placement`` would move to (charged in ``nodes``), or None."""
    demand = charge(placement.resources.cpus, policy.demand_per_vcpu)
    params: dict[str, float | int] = {**placement.resources.as_dict(), "demand": demand}
    walk = Walk(order)
    while (attempt := walk.next_attempt()) is not None:
        node = nodes[attempt.node]
        load = attempt.target_load(policy.target_load)
        refused: Denial | None = deny(
            node_guard(load), node.guard_row(), {**params, "target_load": load}
        )
        if refused is not None:
            walk.refused(attempt.node, refused)
        else:
            walk.admitted(attempt.node)
    target = walk.admitted_on
    if target is not None:
        landed = nodes[target]
        nodes[target] = replace(
            landed,
            used=landed.used.plus(placement.resources),
            expected_demand=landed.expected_demand + demand,
        )
    return target


def _cluster_missing(
    cluster: ClusterState | None, source: NodeState, surge: NodeState | None
) -> Resources:
    if cluster is None:
        return Resources()
    added = Resources() if surge is None else surge.limits
    missing = []
    for d in ALLOCATION:
        lowered = source.limits.get(d) > added.get(d)
        after = cluster.total.get(d) - source.limits.get(d) + added.get(d)
        need = cluster.claimed.get(d) + cluster.unclaimed_used.get(d)
        missing.append(max(0, need - after) if lowered else 0)
    return Resources(*missing)


def judge(
    snapshot: Snapshot,
    policy: DemandPolicy,
    rng: Random,
    *,
    surge: bool = True,
) -> Verdict:
    """Relocate every placement of ``snapshot.node`` in the snapshot, as the node sync would.

    The candidates are the relocation's own (``nodesync.relocation_candidates``: every
    schedulable node but the source), plus the surge node when ``surge``; each placement, oldest
    first, walks them in the ranking's order drawn from ``rng``. A node the snapshot does not
    hold has nothing to move: it fits.
    """
    by_name = {n.name: n for n in snapshot.nodes}
    source = by_name.get(snapshot.node)
    if source is None or not snapshot.placements:
        return Verdict(snapshot.node, len(snapshot.placements))
    extra = surge_for(source, snapshot.nodes) if surge else None
    candidates = [n for n in eligible(snapshot.nodes) if n.name != source.name]
    if extra is not None:
        candidates.append(extra)
    nodes = {n.name: n for n in candidates}
    stranded: list[Placement] = []
    targets: list[tuple[str, str]] = []
    for placement in snapshot.placements:
        # Ranked afresh for each placement, as the real relocation ranks before each walk.
        order = [r.node.name for r in rank(list(nodes.values()), policy.target_load, rng)]
        target = _walk_one(placement, nodes, order, policy)
        if target is None:
            stranded.append(placement)
        else:
            targets.append((placement.id, target))
    needed = Resources()
    for p in stranded:
        needed = needed.plus(p.resources)
    room = Resources()
    for n in nodes.values():
        if n.schedulable:
            room = room.plus(_free(n))
    return Verdict(
        node=source.name,
        placements=len(snapshot.placements),
        stranded=tuple(p.id for p in stranded),
        missing=needed.minus_floored(room),
        cluster_missing=_cluster_missing(snapshot.cluster, source, extra),
        targets=tuple(targets),
    )


__all__ = ["SURGE_SUFFIX", "Snapshot", "Verdict", "judge", "surge_for"]
