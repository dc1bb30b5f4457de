"""The dry run of an admission: the same guards and walk as a real one, over rows read, not locked.

The ledger's admission transaction charges the namespace side (the claim, or the cluster's
unclaimed sums; an advisory claim's overage also to the cluster), then the node. A trial
evaluates exactly those guards in the same order, in Python, on the current rows, and walks the
candidates with the same waiver rule, so it names the node a placement would land on and every
refusal on the way. It writes nothing: no charge, no audit event, no demand.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from fleetgate.domain.capacity.claims import Claim
from fleetgate.domain.capacity.denials import Denial, DimensionDetail, deny, over_limit
from fleetgate.domain.capacity.dimensions import Resources
from fleetgate.domain.capacity.guards import CLAIM_GUARD, CLUSTER_GUARD, node_guard
from fleetgate.domain.capacity.model import ClusterState, NodeState
from fleetgate.domain.capacity.overage import overage_increase
from fleetgate.domain.capacity.walk import Walk


@dataclass(frozen=True)
class Trial:
    """What a placement would do now: the node it lands on (or none) and every refusal."""

    node: str | None
    denials: dict[str, Denial] = field(default_factory=dict)
    candidates: tuple[str, ...] = ()
    waived: bool = False
    claim_over_limit: tuple[DimensionDetail, ...] = ()


def claim_row(claim: Claim) -> dict[str, object]:
    """The claim as the named columns the claim guard is written over."""
    row: dict[str, object] = {f"limit_{d}": v for d, v in claim.limit.as_dict().items()}
    row.update({f"used_{d}": v for d, v in claim.used.as_dict().items()})
    return row


def _namespace_side(
    resources: Resources, cluster: ClusterState, claim: Claim | None, hard: bool
) -> tuple[Denial | None, tuple[DimensionDetail, ...]]:
    """The namespace stage's refusal (if any) and an advisory claim's over-limit dimensions."""
    params = dict(resources.as_dict())
    if claim is None:
        return deny(CLUSTER_GUARD, cluster.guard_row(), params), ()
    row = claim_row(claim)
    if hard:
        refused = deny(CLAIM_GUARD, row, params)
        if refused is not None:
            return refused, ()
        return None, ()
    over = over_limit(CLAIM_GUARD, row, params)
    extra = overage_increase(claim.limit, claim.used, resources)
    if extra.is_zero():
        return None, over
    return deny(CLUSTER_GUARD, cluster.guard_row(), dict(extra.as_dict())), over


def trial(
    resources: Resources,
    demand: float,
    target_load: float,
    order: Iterable[str],
    nodes: Mapping[str, NodeState],
    cluster: ClusterState,
    claim: Claim | None = None,
    *,
    hard: bool = False,
) -> Trial:
    """Walk ``order`` as an admission would, against ``nodes``, ``cluster`` and the active claim.

    A candidate missing from ``nodes`` (it left the ledger) is skipped, as the real walk skips
    it. The namespace side does not depend on the node, so a refusal there refuses every
    candidate with the same denial, as the real transaction would.
    """
    walk = Walk(order)
    params: dict[str, float | int] = {**resources.as_dict(), "demand": demand}
    side, over = _namespace_side(resources, cluster, claim, hard)
    while (attempt := walk.next_attempt()) is not None:
        node = nodes.get(attempt.node)
        if node is None:
            continue
        if side is not None:
            walk.refused(attempt.node, side)
            continue
        load = target_load if attempt.enforce_demand else 0.0
        refused = deny(node_guard(load), node.guard_row(), {**params, "target_load": load})
        if refused is not None:
            walk.refused(attempt.node, refused)
            continue
        walk.admitted(attempt.node)
    return Trial(
        node=walk.admitted_on,
        denials=dict(walk.denials),
        candidates=tuple(walk.candidates),
        waived=walk.waived and walk.admitted_on is not None,
        claim_over_limit=over if walk.admitted_on is not None else (),
    )
