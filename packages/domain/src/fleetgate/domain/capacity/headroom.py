"""The forecast behind the ledger gate: could each node of each pool be drained now?

Every node that holds placements is judged as the gate judges a start
(``relocation.judge``: its placements relocated onto the rest of the ledger), each against the
same snapshot. A node that would not fit will see its rotation held (gate ``ledgerCapacity``)
when its turn comes; ``fleetgate check`` reports each one, from a ledger or a snapshot, as
finding ``LedgerHeadroom``. Every node, not a sample: the node that cannot move may be a small
one holding a single placement too large for any other node, not the one that holds the most.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from random import Random

from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.capacity.model import ClusterState, NodeState, Placement
from fleetgate.domain.capacity.relocation import Snapshot, Verdict, judge

LEDGER_HEADROOM = "LedgerHeadroom"
"""The finding code: a node whose placements could not all be relocated now."""


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
        f"(missing: {_missing(verdict)}); its rotation will be held (gate ledgerCapacity). "
        "Raise the pool's limits, shrink a claim or add a node"
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
    seed: int = 0,
) -> list[PoolHeadroom]:
    """Each pool's verdicts, one per node holding placements (``placements`` by node name)."""
    pools: dict[str, list[NodeState]] = {}
    for node in nodes:
        pools.setdefault(node.pool, []).append(node)
    out = []
    for pool, members in sorted(pools.items()):
        verdicts = tuple(
            judge(Snapshot(n.name, tuple(nodes), cluster, tuple(placements[n.name])), policy,
                  Random(seed))
            for n in sorted(members, key=lambda n: n.name)
            if placements.get(n.name)
        )  # fmt: skip
        out.append(PoolHeadroom(pool, len(members), verdicts))
    return out


__all__ = ["LEDGER_HEADROOM", "PoolHeadroom", "headroom", "held_message"]
