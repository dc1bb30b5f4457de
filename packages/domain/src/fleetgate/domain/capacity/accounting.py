"""How a namespace's usage is accounted in the cluster row, with or without an active claim.

The cluster row holds ``claimed_*`` (Σ active claim limits) and ``unclaimed_used_*`` (usage of
namespaces without an active claim, plus every claim's advisory overage). What one namespace
contributes to it is its *share*:

* with an active claim: ``claimed = limit`` and ``unclaimed_used = max(0, used − limit)``;
* without one (never claimed, expired, deleted): ``claimed = 0`` and ``unclaimed_used = used``.

Every claim transition moves the cluster row by the difference of two shares, so the row stays
equal to its recomputation from the placements. The guard of a transition tests the state it
produces: each dimension whose ``claimed + unclaimed_used`` it raises must still fit the total.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetgate.domain.capacity.denials import Denial, DimensionDetail, Stage
from fleetgate.domain.capacity.dimensions import ALLOCATION, Resources
from fleetgate.domain.capacity.model import ClusterState
from fleetgate.domain.capacity.overage import overage


@dataclass(frozen=True)
class Share:
    """What one namespace contributes to the cluster row: claimed limits, unclaimed usage."""

    claimed: Resources
    unclaimed_used: Resources


def share(limit: Resources, used: Resources, active: bool) -> Share:
    """The cluster share of a namespace using ``used``, with an active claim of ``limit`` or not."""
    if active:
        return Share(claimed=limit, unclaimed_used=overage(used, limit))
    return Share(claimed=Resources(), unclaimed_used=used)


def unclaimed_share(used: Resources) -> Share:
    """The share of a namespace without an active claim."""
    return share(Resources(), used, active=False)


def _shift(value: Resources, before: Resources, after: Resources) -> tuple[Resources, bool]:
    """``value − before + after`` per dimension, floored at zero; True if a floor was needed."""
    raw = [value.get(d) - before.get(d) + after.get(d) for d in ALLOCATION]
    return Resources(*(max(0, v) for v in raw)), any(v < 0 for v in raw)


@dataclass(frozen=True)
class ClusterChange:
    """The cluster row's counters after a transition, and the dimensions it raised.

    ``clamped`` means a counter would have gone negative and was floored at zero: the row had
    drifted from the placements, which the next reconcile pass repairs.
    """

    claimed: Resources
    unclaimed_used: Resources
    raised: frozenset[str]
    clamped: bool

    def fits(self, total: Resources, dimension: str) -> bool:
        """Whether ``claimed + unclaimed_used <= total`` holds in ``dimension`` afterwards."""
        return self.claimed.get(dimension) + self.unclaimed_used.get(dimension) <= total.get(
            dimension
        )

    def refused(self, total: Resources) -> frozenset[str]:
        """The raised dimensions that no longer fit: the mirror guard's verdict."""
        return frozenset(d for d in self.raised if not self.fits(total, d))


def transition(cluster: ClusterState, before: Share, after: Share) -> ClusterChange:
    """Move the cluster row from one share of a namespace to another."""
    claimed, clamped_c = _shift(cluster.claimed, before.claimed, after.claimed)
    unclaimed, clamped_u = _shift(
        cluster.unclaimed_used, before.unclaimed_used, after.unclaimed_used
    )
    raised = frozenset(
        d
        for d in ALLOCATION
        if after.claimed.get(d) + after.unclaimed_used.get(d)
        > before.claimed.get(d) + before.unclaimed_used.get(d)
    )
    return ClusterChange(claimed, unclaimed, raised, clamped_c or clamped_u)


def capacity_denial(
    cluster: ClusterState, change: ClusterChange, requested: dict[str, int]
) -> Denial | None:
    """The refusal of a transition that raises a dimension beyond the cluster total, or None.

    Each dimension reports ``limit = total − claimed`` (before), ``used`` = the unclaimed usage
    the transition leaves, ``requested`` = how much the claimed limit moves; ``exceeded`` is the
    mirror guard's verdict, so it holds exactly when ``used + requested > limit`` on a raised
    dimension.
    """
    failed = change.refused(cluster.total)
    if not failed:
        return None
    return Denial(
        stage=Stage.CLUSTER,
        dimensions=tuple(
            DimensionDetail(
                dimension=d,
                limit=float(cluster.total.get(d) - cluster.claimed.get(d)),
                used=float(change.unclaimed_used.get(d)),
                requested=float(requested[d]),
                exceeded=d in failed,
            )
            for d in ALLOCATION
        ),
    )


__all__ = [
    "ClusterChange",
    "Share",
    "capacity_denial",
    "share",
    "transition",
    "unclaimed_share",
]
