"""The fake cluster's records, shared by its rooms: pools, claims, Pods, budgets, on one clock.

Every room (Karpenter's lifecycle, the scheduler, the observations) works on this one state; the
tables keep their indexes current by themselves (see ``tables``), told of each record's writes
through ``revisions``.
"""

from __future__ import annotations

import itertools
from typing import Any

from fleetgate.adapters.fakecluster.faults import Faults
from fleetgate.adapters.fakecluster.model import Claim, Node, Pool, Revisions
from fleetgate.adapters.fakecluster.pdb import DisruptionBudget
from fleetgate.adapters.fakecluster.tables import ClaimTable, PodTable
from fleetgate.domain.rotation.cluster import ObjectNotFound


class ClusterState:
    """The records of one fake cluster and the counters that order them."""

    def __init__(self, clock: Any) -> None:
        self.clock = clock
        self.pools: dict[str, Pool] = {}
        self.claims = ClaimTable()
        self.archive: dict[str, Claim] = {}  # every claim ever created, removed ones included
        self.pods = PodTable()
        self.faults = Faults()
        self.pdbs: list[DisruptionBudget] = []  # PodDisruptionBudgets
        #: Orders Pods (their ``seq``) and happenings due at the same instant.
        self.seq = itertools.count()
        self.revisions = Revisions()
        self.revisions.on_pod = self.pods.changed
        self.revisions.on_claim = self.claims.changed

    def pool(self, name: str) -> Pool:
        """The NodePool ``name``, or ObjectNotFound."""
        try:
            return self.pools[name]
        except KeyError:
            raise ObjectNotFound(f"nodepool {name!r} not found") from None

    def claim(self, name: str) -> Claim:
        """The NodeClaim ``name``, or ObjectNotFound."""
        try:
            return self.claims[name]
        except KeyError:
            raise ObjectNotFound(f"nodeclaim {name!r} not found") from None

    def node(self, name: str) -> Node:
        """The Node ``name`` (its claim's), or ObjectNotFound."""
        claim = self.claims.get(name)
        if claim is None or claim.node is None:
            raise ObjectNotFound(f"node {name!r} not found")
        return claim.node
