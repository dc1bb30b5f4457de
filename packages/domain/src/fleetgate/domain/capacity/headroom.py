"""The forecast behind the ledger gate: could each node of each pool be drained now?

Every node that holds placements is judged as the gate judges a drain (its relocation plan,
``relocation.plan``: its placements moved onto the rest of the ledger, behind what other
departures must move first), each against the same snapshot and without a surge (none exists
yet). A node that would not fit now needs its surge's room, or more, when its turn comes;
``fleetgate check`` reports each one, from a ledger or a snapshot, as finding
``LedgerHeadroom``. Every node, not a sample: the node that cannot move may be a small
one holding a single placement too large for any other node, not the one that holds the most.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.capacity.model import ClusterState, NodeState, Placement
from fleetgate.domain.capacity.relocation import Snapshot, Verdict, plan
from fleetgate.domain.nodesync import taken_out

LEDGER_HEADROOM = "LedgerHeadroom"
"""The finding code: a node whose placements could not all be relocated now."""
CAPACITY_HOLD_MEETS_EXPIRY = "CapacityHoldMeetsExpiry"
"""The finding code: a node held for capacity would be (or was) force-expired by Karpenter,
which drains it held or not: the ledger gate's one limit."""
WAYS_OUT = "raise the pool's limits, shrink a claim or add a node"
"""What clears a hold, in every message that reports one."""


def _missing(verdict: Verdict) -> str:
    short = ", ".join(f"{d} {n}" for d, n in verdict.shortfall().as_dict().items() if n)
    return short or "none in total; the room is split across nodes"


def held_message(pool: str, verdict: Verdict) -> str:
    """One held node's finding text, with the ways out."""
    what = (
        f"would strand {len(verdict.stranded)} of {verdict.placements} placement(s)"
        if verdict.stranded
        else "would leave the claims beyond the cluster total"
    )
    return (
        f"pool {pool or '(none)'}: draining node {verdict.node} {what} "
        f"(missing: {_missing(verdict)}): its drain waits until its replacement, or other "
        f"room, joins the ledger (gate ledgerCapacity). Ways out: {WAYS_OUT}"
    )


def expiry_message(pool: str, verdict: Verdict, expire_after: str) -> str:
    """What a held node meets: Karpenter's forced expiry, which no gate holds back."""
    return (
        f"pool {pool or '(none)'}: if no room appears, node {verdict.node} stays held until "
        f"Karpenter force-expires it (expireAfter {expire_after} after its creation) and drains "
        f"it held or not, stranding {len(verdict.stranded)} placement(s). Ways out: {WAYS_OUT}"
    )


@dataclass(frozen=True)
class PoolHeadroom:
    """One pool: how many nodes it has, and the verdict on each node that holds placements."""

    pool: str
    nodes: int
    verdicts: tuple[Verdict, ...] = ()

    @property
    def held(self) -> tuple[Verdict, ...]:
        """The verdicts of the nodes whose placements would not all find room."""
        return tuple(v for v in self.verdicts if not v.fits)

    @property
    def fits(self) -> bool:
        """True when every node's placements would all find room (or none holds any)."""
        return not self.held

    def messages(self) -> list[str]:
        """One finding text per held node (none when the pool fits)."""
        return [held_message(self.pool, v) for v in self.held]

    def summary(self) -> str:
        """One line for the table: the pool's standing."""
        if self.fits:
            return (
                f"pool {self.pool or '(none)'}: every node's placements can be relocated "
                f"({len(self.verdicts)} of {self.nodes} node(s) hold placements)"
            )
        return "; ".join(self.messages())

    def as_dict(self) -> dict[str, object]:
        """The wire form (``check -o json``): every judged node, and the held ones by name."""
        return {
            "pool": self.pool,
            "nodes": self.nodes,
            "fits": self.fits,
            "held": [v.node for v in self.held],
            "verdicts": [v.as_dict() for v in self.verdicts],
        }


def headroom(
    nodes: Sequence[NodeState],
    placements: Mapping[str, Sequence[Placement]],
    cluster: ClusterState | None,
    policy: DemandPolicy,
) -> list[PoolHeadroom]:
    """Each pool's verdicts, one per node holding placements (``placements`` by node name)."""
    pools: dict[str, list[NodeState]] = {}
    for node in nodes:
        pools.setdefault(node.pool, []).append(node)
    everything = tuple(nodes)

    def judged(node: str) -> Verdict:
        elsewhere = tuple(p for other in taken_out(nodes, node) for p in placements.get(other, ()))
        snapshot = Snapshot(node, everything, cluster, tuple(placements[node]), elsewhere)
        return plan(snapshot, policy)

    out = []
    for pool, members in sorted(pools.items()):
        names = sorted(n.name for n in members if placements.get(n.name))
        out.append(PoolHeadroom(pool, len(members), tuple(judged(name) for name in names)))
    return out


__all__ = [
    "CAPACITY_HOLD_MEETS_EXPIRY",
    "LEDGER_HEADROOM",
    "WAYS_OUT",
    "PoolHeadroom",
    "expiry_message",
    "headroom",
    "held_message",
]
