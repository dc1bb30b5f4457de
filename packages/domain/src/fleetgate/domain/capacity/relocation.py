"""The relocation plan of a node's placements: the verdict of the ledger gate, and what the node
sync then carries out (issue 41, "one plan").

A rotation drains a node; with the node sync on, every placement the ledger holds there must move
to another node, each move one guarded ``move`` that charges the target node only. :func:`plan`
decides those moves once, deterministically, over a snapshot of the ledger: the same ledger
always gets the same plan, so the gate's verdict *is* the relocation the sync then makes, not a
second estimate of it (two random walks once disagreed on fragmented room).

How it decides:

- placements go largest first (vCPUs, then memory, then disk; then oldest, then id), so the big
  ones, which fit fewest nodes, are placed while the room is least split;
- each walks the candidates in the ranking's order without its shuffle (load bucket, then weight,
  then name: ``ranking.ordered``), demand clause first and one waiver pass, against the node
  guard (``guards.node_guard``, evaluated by ``denials.deny``), exactly as a placement walks
  (``walk.Walk``); the first candidate with room is its target, and the simulated move is
  charged there before the next placement walks, so two placements never count on the same room;
- the candidates are the nodes of the snapshot that take work (schedulable) but the source: a
  surge node counts once it is in the ledger, and never before; nothing stands in for it.
- what other nodes must move too comes first (``Snapshot.elsewhere``: placements stranded on
  nodes that are leaving, and those of rotations in progress in any pool): they are planned
  before the node's own placements, and their room is not the node's to use.

What a move leaves alone, the plan leaves alone: a move changes neither the namespace's usage nor
its claim (hard or advisory) nor the cluster's unclaimed usage, so the claim and cluster guards
cannot refuse one. What the drain changes is the cluster total (``Σ node limits``): the node's
limits leave it. The plan checks that every active claim and the unclaimed usage still fit what
is left, in each dimension the drain would take below what they need (one already short before
is not this drain's doing, as for claim changes, capacity spec 6.3).

The plan writes nothing. Carried out later, each move is still one guarded write: room taken in
between (an admission after the plan) makes that move a refusal, the placement stays where it is
(stranded, counted and planned again), never an over-commit.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace

from fleetgate.domain.capacity.demand import DemandPolicy, charge
from fleetgate.domain.capacity.denials import deny
from fleetgate.domain.capacity.dimensions import ALLOCATION, Resources
from fleetgate.domain.capacity.guards import node_guard
from fleetgate.domain.capacity.model import ClusterState, NodeState, Placement
from fleetgate.domain.capacity.ranking import eligible, order_key
from fleetgate.domain.capacity.walk import Walk


@dataclass(frozen=True)
class Snapshot:
    """What a plan reads: every ledger node, the cluster row, the node's placements, and the
    placements that must leave other nodes first (stranded, or of rotations in progress)."""

    node: str
    nodes: tuple[NodeState, ...]
    cluster: ClusterState | None
    placements: tuple[Placement, ...]
    elsewhere: tuple[Placement, ...] = ()


@dataclass(frozen=True)
class Move:
    """One planned relocation: ``placement`` to ``target``; ``waived``: by the waiver pass (the
    move must then be made with the demand clause waived, as the plan judged it)."""

    placement: str
    target: str
    waived: bool = False


@dataclass(frozen=True)
class Verdict:
    """The relocation plan of ``node``'s placements, and whether it lets the node be drained.

    ``moves`` are the planned moves, in the order to make them. ``stranded`` are the placements
    no candidate would take (ids, in plan order); ``walks`` keeps each one's simulated walk (its
    candidates and their refusals, for the audit trail). ``missing`` is, per allocation
    dimension, how much the stranded placements need beyond all the free room the candidates
    would have left: all zero while some stay stranded means the room exists but no single node
    has enough of it (add a node, or raise a node's limits). ``cluster_missing`` is how far, per
    dimension, the claims and unclaimed usage would exceed the cluster total once the node is
    gone.
    """

    node: str
    placements: int
    moves: tuple[Move, ...] = ()
    stranded: tuple[str, ...] = ()
    missing: Resources = field(default_factory=Resources)
    cluster_missing: Resources = field(default_factory=Resources)
    walks: dict[str, Walk] = field(default_factory=dict, compare=False, repr=False)

    @property
    def fits(self) -> bool:
        """True when every placement would move and the claims still fit the cluster."""
        return not self.stranded and self.cluster_missing.is_zero()

    @property
    def targets(self) -> tuple[tuple[str, str], ...]:
        """(placement, target) for each planned move."""
        return tuple((m.placement, m.target) for m in self.moves)

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


def largest_first(placements: Iterable[Placement]) -> list[Placement]:
    """The order a plan places them in: largest first, then oldest, then by id."""
    return sorted(
        placements,
        key=lambda p: (
            -p.resources.cpus,
            -p.resources.memory_mb,
            -p.resources.disk_gb,
            p.admitted_at,
            p.id,
        ),
    )


class _Room:
    """The candidates, kept in ranked order while simulated moves charge them."""

    def __init__(self, nodes: Iterable[NodeState], policy: DemandPolicy) -> None:
        self._policy = policy
        self.nodes: dict[str, NodeState] = {}
        self._ranked: list[tuple[int, float, str]] = []
        for node in nodes:
            self.nodes[node.name] = node
            self._ranked.append(order_key(node, policy.target_load))
        self._ranked.sort()

    def order(self) -> Iterator[str]:
        """The candidates' names, best ranked first (a copy: charging does not disturb it)."""
        return (name for _, _, name in list(self._ranked))

    def charge(self, name: str, placement: Placement) -> None:
        """Charge a simulated move of ``placement`` to ``name`` and re-rank that node."""
        node = self.nodes[name]
        self._ranked.remove(order_key(node, self._policy.target_load))
        node = replace(
            node,
            used=node.used.plus(placement.resources),
            expected_demand=node.expected_demand
            + charge(placement.resources.cpus, self._policy.demand_per_vcpu),
        )
        self.nodes[name] = node
        insort(self._ranked, order_key(node, self._policy.target_load))

    def free(self) -> Resources:
        """All the free room the candidates have left, per dimension."""
        room = Resources()
        for n in self.nodes.values():
            room = room.plus(n.limits.minus_floored(n.used))
        return room


def _walk(placement: Placement, room: _Room, policy: DemandPolicy) -> Walk:
    """The placement's walk over ``room`` (not yet charged): admitted on a node, or refused."""
    demand = charge(placement.resources.cpus, policy.demand_per_vcpu)
    params: dict[str, float | int] = {**placement.resources.as_dict(), "demand": demand}
    walk = Walk(room.order())
    while (attempt := walk.next_attempt()) is not None:
        load = attempt.target_load(policy.target_load)
        refused = deny(
            node_guard(load), room.nodes[attempt.node].guard_row(), {**params, "target_load": load}
        )
        if refused is not None:
            walk.refused(attempt.node, refused)
        else:
            walk.admitted(attempt.node)
    return walk


def _cluster_missing(cluster: ClusterState | None, source: NodeState) -> Resources:
    if cluster is None:
        return Resources()
    missing = []
    for d in ALLOCATION:
        need = cluster.claimed.get(d) + cluster.unclaimed_used.get(d)
        after = cluster.total.get(d) - source.limits.get(d)
        already_short = need > cluster.total.get(d)
        missing.append(0 if already_short else max(0, need - after))
    return Resources(*missing)


def plan(snapshot: Snapshot, policy: DemandPolicy) -> Verdict:
    """The relocation plan of every placement of ``snapshot.node`` (module docstring).

    A node the snapshot does not hold, or one with nothing placed, has nothing to move: it fits.
    """
    by_name = {n.name: n for n in snapshot.nodes}
    source = by_name.get(snapshot.node)
    if source is None or not snapshot.placements:
        return Verdict(snapshot.node, len(snapshot.placements))
    room = _Room((n for n in eligible(snapshot.nodes) if n.name != source.name), policy)
    for placement in largest_first(snapshot.elsewhere):
        # What must leave other nodes is planned first: the room it takes is not this node's.
        target = _walk(placement, room, policy).admitted_on
        if target is not None:
            room.charge(target, placement)
    moves: list[Move] = []
    stranded: list[Placement] = []
    walks: dict[str, Walk] = {}
    for placement in largest_first(snapshot.placements):
        walk = _walk(placement, room, policy)
        if walk.admitted_on is None:
            stranded.append(placement)
            walks[placement.id] = walk
            continue
        room.charge(walk.admitted_on, placement)
        moves.append(Move(placement.id, walk.admitted_on, walk.waived))
    needed = Resources()
    for p in stranded:
        needed = needed.plus(p.resources)
    return Verdict(
        node=source.name,
        placements=len(snapshot.placements),
        moves=tuple(moves),
        stranded=tuple(p.id for p in stranded),
        missing=needed.minus_floored(room.free()),
        cluster_missing=_cluster_missing(snapshot.cluster, source),
        walks=walks,
    )


__all__ = ["Move", "Snapshot", "Verdict", "largest_first", "plan"]
