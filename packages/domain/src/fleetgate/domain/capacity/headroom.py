"""The forecast behind the ledger gate: can each pool still drain its largest node?

A pool whose largest node (the one whose placements weigh most) could be drained with every
placement relocated can rotate any of its nodes, as far as the ledger can tell now; one whose
largest cannot will see the rotation held (gate ``ledgerCapacity``) when that node's turn comes.
``fleetgate check`` reports it, from a ledger or a snapshot, as finding ``LedgerHeadroom``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from random import Random

from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.capacity.dimensions import ALLOCATION, Resources
from fleetgate.domain.capacity.model import ClusterState, NodeState, Placement
from fleetgate.domain.capacity.relocation import Snapshot, Verdict, judge

LEDGER_HEADROOM = "LedgerHeadroom"
"""The finding code: a pool's largest node could not be drained now."""


@dataclass(frozen=True)
class PoolHeadroom:
    """One pool's largest node and the verdict on draining it (None: no node holds anything)."""

    pool: str
    nodes: int
    largest: str | None
    verdict: Verdict | None

    @property
    def fits(self) -> bool:
        """True when the largest node's placements would all find room (or there are none)."""
        return self.verdict is None or self.verdict.fits

    def message(self) -> str:
        """The finding's text, with the ways out."""
        v = self.verdict
        if v is None or v.fits:
            return f"pool {self.pool or '(none)'}: every node's placements can be relocated"
        short = ", ".join(f"{d} {n}" for d, n in v.shortfall().as_dict().items() if n)
        missing = short or "none in total; the room is split across nodes"
        what = (
            f"would strand {len(v.stranded)} of {v.placements} placement(s)"
            if v.stranded
            else "would leave the claims beyond the cluster total"
        )
        return (
            f"pool {self.pool or '(none)'}: draining its largest node {v.node} {what} "
            f"(missing: {missing}); its rotation will be held (gate ledgerCapacity). "
            "Raise the pool's limits, shrink a claim or add a node"
        )

    def as_dict(self) -> dict[str, object]:
        """The wire form (``check -o json``)."""
        return {
            "pool": self.pool,
            "nodes": self.nodes,
            "largest": self.largest,
            "fits": self.fits,
            "verdict": None if self.verdict is None else self.verdict.as_dict(),
        }


def _weight(used: Resources) -> tuple[int, ...]:
    return tuple(used.get(d) for d in ALLOCATION)


def headroom(
    nodes: Sequence[NodeState],
    placements: Mapping[str, Sequence[Placement]],
    cluster: ClusterState | None,
    policy: DemandPolicy,
    seed: int = 0,
) -> list[PoolHeadroom]:
    """Each pool's headroom against its largest node (``placements`` by node name), by pool."""
    pools: dict[str, list[NodeState]] = {}
    for node in nodes:
        pools.setdefault(node.pool, []).append(node)
    out = []
    for pool, members in sorted(pools.items()):
        loaded = [n for n in members if placements.get(n.name)]
        if not loaded:
            out.append(PoolHeadroom(pool, len(members), None, None))
            continue
        largest = max(loaded, key=lambda n: (_weight(n.used), n.name))
        snapshot = Snapshot(largest.name, tuple(nodes), cluster, tuple(placements[largest.name]))
        verdict = judge(snapshot, policy, Random(seed))
        out.append(PoolHeadroom(pool, len(members), largest.name, verdict))
    return out


__all__ = ["LEDGER_HEADROOM", "PoolHeadroom", "headroom"]
