"""Ledger invariants that must hold after every step of any scenario, checked from the rows.

Shared by the node-sync service tests and the end-to-end rotation of a loaded fleet.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from fleetgate.domain.capacity.dimensions import ALLOCATION, Resources
from fleetgate.domain.ports import CapacityLedger


def _sum(items: Iterable[Resources]) -> Resources:
    total = Resources()
    for item in items:
        total = total.plus(item)
    return total


async def check_ledger(ledger: CapacityLedger, expected_ids: set[str] | None = None) -> None:
    """Every placement exists exactly once, on a node of the ledger; each node's used counters
    equal the sum of its placements and of the room reserved on it, and stay within its limits;
    the cluster row agrees, and what it promises (claims) plus what unclaimed namespaces use
    stays within its total.

    ``expected_ids``: the placements that must exist (nothing lost, nothing invented).
    """
    placements = await ledger.placements()
    counts = Counter(p.id for p in placements)
    assert all(n == 1 for n in counts.values()), f"placements listed twice: {counts}"
    if expected_ids is not None:
        lost, invented = expected_ids - set(counts), set(counts) - expected_ids
        assert not lost and not invented, f"lost {sorted(lost)}, invented {sorted(invented)}"
    nodes = {n.name: n for n in await ledger.nodes()}
    for p in placements:
        assert p.node in nodes, f"placement {p.id} is on {p.node}, which is not in the ledger"
    reserved = await ledger.reservations()
    for name, node in nodes.items():
        held = _sum(p.resources for p in placements if p.node == name)
        held = held.plus(_sum(r.resources for r in reserved if r.node == name))
        assert node.used == held, (
            f"node {name}: used {node.used} but its placements and reservations sum to {held}"
        )
        for d in ALLOCATION:
            assert node.used.get(d) <= node.limits.get(d), (
                f"node {name}: {d} used {node.used.get(d)} over its limit {node.limits.get(d)}"
            )
    cluster = await ledger.cluster()
    assert cluster.total == _sum(n.limits for n in nodes.values())
    promised = cluster.claimed.plus(cluster.unclaimed_used)
    for d in ALLOCATION:
        assert promised.get(d) <= cluster.total.get(d), (
            f"cluster: {d} claimed + unclaimed used {promised.get(d)} over the total "
            f"{cluster.total.get(d)}"
        )
    if cluster.claimed.is_zero():
        # Without claims every placement is charged to the unclaimed side, exactly once.
        assert cluster.unclaimed_used == _sum(p.resources for p in placements)
