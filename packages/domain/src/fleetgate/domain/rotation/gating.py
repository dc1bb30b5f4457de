"""The start gates of one pass, in their order (spec §7.2 step 4; the gates are in gates.py).

A pass that would start a rotation (:func:`start_gates`) and a pass that would retry a failed
one (:func:`retry_gates`) ask the same gates; the first that is closed holds the pass back and
is reported. A new gate is one more line in each.
"""

from __future__ import annotations

from fleetgate.domain.rotation.budgets import remaining
from fleetgate.domain.rotation.context import Pass
from fleetgate.domain.rotation.disruption import budget_counts, not_ready_nodes
from fleetgate.domain.rotation.gates import (
    Blocked,
    PoolMarks,
    budget_gate,
    pool_state_gate,
    start_gate,
)
from fleetgate.domain.rotation.reference import reference_gate
from fleetgate.domain.rotation.selection import Bucket


def start_gates(p: Pass) -> Blocked | None:
    """The first closed gate before a rotation may start (None: every gate is open)."""
    obs = p.obs
    marked = p.cache is None or p.cache.reference_marked
    blocked = reference_gate(obs, marked) or start_gate(
        p.now, p.policy, PoolMarks.from_annotations(obs.annotations)
    )
    blocked = blocked or pool_state_gate(obs.static, obs.ready)
    if blocked is None and p.candidate is not None:
        # Last, and only with a candidate: when nothing may go, the census is the better answer
        # to "why not?", and the walk over the pool that counting the budget takes is skipped.
        blocked = pool_budget_gate(p)
    return blocked


def retry_gates(p: Pass) -> Blocked | None:
    """The first closed gate before a failed rotation may be retried (None: all open)."""
    blocked = start_gate(p.now, p.policy, PoolMarks.from_annotations(p.obs.annotations))
    return blocked or pool_state_gate(p.obs.static, p.obs.ready) or pool_budget_gate(p)


def pool_budget_gate(p: Pass) -> Blocked | None:
    """Gate 8, unless the policy ignores the NodePool's budgets (the walk over the claims is
    made only when every other gate is open and the pool has budgets)."""
    obs = p.obs
    if p.policy.policy.ignore_disruption_budgets or not obs.budgets:
        return None
    # Most passes are decided without the walk: the census bounds the pool's Ready claims from
    # below (the buckets after NotReady hold only Ready ones; a budget allows no less for more
    # nodes) and the disruptions under way from above (deleting, being disrupted, opted out,
    # plus the Nodes not Ready); when even those leave room, the exact count cannot close it.
    counts = p.census.counts
    fewest = sum(counts.get(b, 0) for b in _READY_ONLY)
    most = sum(counts.get(b, 0) for b in _MAY_DISRUPT) + not_ready_nodes(obs)
    if remaining(obs.budgets, p.now, fewest, most) > 0:
        return None
    return budget_gate(obs.budgets, p.now, *budget_counts(obs))


_MAY_DISRUPT = (Bucket.OPTED_OUT, Bucket.DELETING, Bucket.KARPENTER_DISRUPTING)
_READY_ONLY = (
    Bucket.IN_FLIGHT,
    Bucket.TERMINAL,
    Bucket.IN_BACKOFF,
    Bucket.NOT_TRIGGERED,
    Bucket.ELIGIBLE,
)
