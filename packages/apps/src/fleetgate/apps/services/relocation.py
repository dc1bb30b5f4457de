"""The ledger's answer to "may this node be drained?", for the rotation controller's gate 9.

When a pass over a pool would start a rotation (every other gate open, a claim eligible), the
controller asks this service for the verdict on every pool node that holds capacity-ledger
placements and steps again with them; the rotation step then starts only a node whose
placements would all find room (``domain.rotation.ledger_gate``). The
judgement is the domain's (``capacity.relocation.judge``); this only reads the snapshot through
the ledger port: every node (one read), then the placements of each pool node whose counters
show any use.

Reads, never writes: the relocation itself is the node sync's, one guarded ``move`` per
placement, so a verdict that has gone stale by the time the drain starts can cost a stranded
placement (kept where it is, counted and retried, never lost) but never an over-committed node.
"""

from __future__ import annotations

from random import Random

from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.capacity.relocation import Snapshot, Verdict, judge
from fleetgate.domain.ports import CapacityLedger
from fleetgate.domain.rotation.annotations import ACTIVE_ROTATION
from fleetgate.domain.rotation.cluster import PoolObservation


class RelocationCheck:
    """Judges, from one ledger read, whether each node of a pool could be drained now."""

    def __init__(
        self, ledger: CapacityLedger, policy: DemandPolicy | None = None, seed: int = 0
    ) -> None:
        self._ledger = ledger
        self.policy = policy or DemandPolicy()
        self._seed = seed
        #: How many passes asked the ledger (for tests and diagnosis).
        self.reads = 0

    async def verdicts(self, obs: PoolObservation) -> dict[str, Verdict] | None:
        """The verdict on each node of ``obs`` that holds placements; None while a rotation is
        in flight (the gate only decides starts, so the ledger is not read)."""
        if obs.annotations.get(ACTIVE_ROTATION):
            return None
        return await self.judge_nodes([n.name for n in obs.nodes])

    async def judge_nodes(self, names: list[str]) -> dict[str, Verdict]:
        """The verdict on each of ``names`` that the ledger shows holding placements."""
        self.reads += 1
        nodes = tuple(await self._ledger.nodes())
        by_name = {n.name: n for n in nodes}
        cluster = None
        out: dict[str, Verdict] = {}
        for name in names:
            state = by_name.get(name)
            if state is None or state.used.is_zero():
                continue  # not in the ledger, or nothing placed there
            placements = tuple(await self._ledger.placements(node=name))
            if not placements:
                continue
            if cluster is None:
                cluster = await self._ledger.cluster()
            snapshot = Snapshot(name, nodes, cluster, placements)
            # A fixed seed per judgement: the same snapshot always gets the same verdict.
            out[name] = judge(snapshot, self.policy, Random(self._seed))
        return out


__all__ = ["RelocationCheck"]
