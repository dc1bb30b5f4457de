"""Karpenter's own disruption state, as the rotation reads it (checked against Karpenter v1).

Fleetgate must never act on a node Karpenter is already replacing, nor on one Karpenter itself
would refuse to disrupt, nor start a surge in a pool where Karpenter will not provision one:

- a Node tainted ``karpenter.sh/disrupted`` (Karpenter's disruption and termination
  controllers set it before a replacement) or a NodeClaim whose ``DisruptionReason`` condition
  is True is already being replaced; a ``Drifted`` claim will be;
- a Pod annotated ``karpenter.sh/do-not-disrupt`` blocks its node's disruption while it is
  active (not Succeeded/Failed, not terminating) and the value is ``"true"``, or a duration that
  Go's ``time.ParseDuration`` reads as greater than 0 and that has not yet run out since the
  Pod's ``status.startTime`` (no start time: still blocking). Any other value is ignored, as
  Karpenter ignores it (``pkg/utils/pod/scheduling.go``: ``parseDoNotDisrupt``,
  ``IsDoNotDisruptActive``): whitespace (``" 2h"``, ``"2h\\n"`` from a YAML block), days
  (``"1d"``), a value past Go's limit (``"2562048h"``), zero or a negative one;
- a static NodePool (``spec.replicas`` set) or one whose ``Ready`` condition is not True gets
  no surge node for a pending placeholder; a pool at ``spec.limits.nodes`` gets none either;
- a NodePool's disruption budgets count its initialized nodes that are not terminating their
  instance, and take off what they allow the ones already disrupting (:func:`budget_counts`);
  a budget Karpenter cannot read stops every disruption of the pool (a pool finding says so).

Deleting a NodeClaim bypasses every one of Karpenter's own checks, so these are fleetgate's.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from itertools import compress, repeat
from operator import attrgetter, is_not, not_

from fleetgate.domain.durations import DurationError, parse_go_duration
from fleetgate.domain.rotation.annotations import KARPENTER_DO_NOT_DISRUPT, TRUE
from fleetgate.domain.rotation.cluster import NodeView, PodView, PoolObservation
from fleetgate.domain.rotation.findings import Finding, FindingCode, finding
from fleetgate.domain.rotation.selection import ClaimView

__all__ = [
    "DISRUPTED_TAINT",
    "NODES",
    "budget_counts",
    "node_disrupted",
    "node_limit_reached",
    "opt_out_expiry",
    "pod_opt_out_active",
    "pod_opted_out_claims",
    "pool_findings",
    "ready_count",
]

DISRUPTED_TAINT = "karpenter.sh/disrupted"
"""The taint Karpenter puts on a node it is disrupting (``NoSchedule``)."""

NODES = "nodes"
"""The ``spec.limits`` / ``status.resources`` entry that counts nodes (milli-units here)."""

_ONE_NODE = 1000


def node_disrupted(node: NodeView) -> bool:
    """Whether Karpenter has tainted ``node`` for disruption (it is replacing it)."""
    return any(t.key == DISRUPTED_TAINT for t in node.taints)


def _opt_out_duration(value: str) -> timedelta | None:
    """How long a do-not-disrupt duration holds, as Karpenter reads it; None: Karpenter ignores it.

    Go's nanoseconds become the whole microseconds that keep the comparison exact: a Pod of age
    ``a`` (whole microseconds) is protected while ``a < d`` nanoseconds, that is while ``a`` is
    below ``d`` rounded up to a microsecond.
    """
    try:
        nanoseconds = parse_go_duration(value)
    except DurationError:
        return None
    if nanoseconds <= 0:
        return None
    return timedelta(microseconds=-(-nanoseconds // 1_000))


def pod_opt_out_active(pod: PodView, now: datetime) -> bool:
    """Whether ``pod``'s ``karpenter.sh/do-not-disrupt`` blocks disrupting its node at ``now``."""
    value = pod.annotations.get(KARPENTER_DO_NOT_DISRUPT)
    if value is None or pod.deleting or pod.phase in ("Succeeded", "Failed"):
        return False
    if value == TRUE:
        return True
    duration = _opt_out_duration(value)
    if duration is None:
        return False
    return pod.started_at is None or now - pod.started_at < duration


def opt_out_expiry(pods: Iterable[PodView], now: datetime) -> datetime | None:
    """The first instant after ``now`` at which an active duration opt-out runs out."""
    ends = []
    for pod in pods:
        value = pod.annotations.get(KARPENTER_DO_NOT_DISRUPT)
        if value is None or value == TRUE:
            continue
        duration = _opt_out_duration(value)
        if duration is not None and pod.started_at is not None and pod_opt_out_active(pod, now):
            ends.append(pod.started_at + duration)
    return min(ends, default=None)


def pod_opted_out_claims(
    claims: Iterable[ClaimView], pods: Iterable[PodView], now: datetime
) -> frozenset[str]:
    """Names of claims whose node holds a Pod with an active do-not-disrupt opt-out."""
    blocked = {p.node_name for p in pods if p.node_name and pod_opt_out_active(p, now)}
    if not blocked:
        return frozenset()
    return frozenset(c.name for c in claims if c.node_name in blocked)


def budget_counts(obs: PoolObservation) -> tuple[int, int]:
    """The pool's nodes as Karpenter's budgets count them, and how many of those are disrupting.

    Karpenter counts initialized nodes only (fleetgate reads a NodeClaim whose Ready condition
    is True as initialized: a replacement still coming up counts for neither), and skips the
    claims whose ``InstanceTerminating`` condition is True (``BuildDisruptionBudgetMapping``:
    counting them would hold a small pool on a percentage budget for longer); a node counts as
    disrupting when it is deleting, tainted ``karpenter.sh/disrupted`` or its Node is not Ready.
    """
    # Asked on every pass that could start a rotation, over pools of thousands: the walks are
    # builtins over attribute getters, and only the few marked nodes are looked up one by one.
    claims, nodes = obs.claims, obs.nodes
    ready = list(compress(claims, map(_READY, claims)))
    if any(map(_TERMINATING, ready)):
        ready = [c for c in ready if not c.instance_terminating]
    marked = {c.name for c in compress(ready, map(is_not, map(_DELETING_AT, ready), repeat(None)))}
    marked.update(c.name for c in compress(ready, map(is_not, map(_REASON, ready), repeat(None))))
    sick = list(compress(nodes, map(not_, map(_READY, nodes))))
    sick += [n for n in compress(nodes, map(_TAINTS, nodes)) if n.ready and node_disrupted(n)]
    for node in sick:
        claim = obs.claim_on(node.name)
        if claim is not None and claim.ready and not claim.instance_terminating:
            marked.add(claim.name)
    return len(ready), len(marked)


def ready_count(obs: PoolObservation) -> int:
    """How many of the pool's claims the budgets count (Ready, not terminating), at C speed."""
    count: int = sum(map(_READY, obs.claims))
    if any(map(_TERMINATING, obs.claims)):
        count -= sum(1 for c in obs.claims if c.ready and c.instance_terminating)
    return count


_READY = attrgetter("ready")
_DELETING_AT = attrgetter("deleting_at")
_REASON = attrgetter("disruption_reason")
_TAINTS = attrgetter("taints")
_TERMINATING = attrgetter("instance_terminating")


def node_limit_reached(obs: PoolObservation) -> bool:
    """Whether the pool's ``spec.limits.nodes`` leaves no room for one more (surge) node."""
    limit = obs.limits.get(NODES)
    return limit is not None and obs.resources.get(NODES, 0) + _ONE_NODE > limit


def pool_findings(obs: PoolObservation) -> tuple[Finding, ...]:
    """Warnings about pool states in which no surge can work (shown by the status and API)."""
    found: list[Finding] = []
    if obs.static:
        found.append(
            finding(
                FindingCode.STATIC_NODE_POOL,
                f"spec.replicas is set ({obs.replicas}): Karpenter keeps a fixed node count and "
                "does not provision for the surge placeholder; fleetgate will not rotate it",
            )
        )
    if not obs.ready:
        found.append(
            finding(
                FindingCode.NODE_POOL_NOT_READY,
                "the NodePool's Ready condition is not True: Karpenter provisions no node "
                "from it, so a surge cannot succeed; fleetgate will not start a rotation",
            )
        )
    for problem in obs.budget_problems:
        found.append(finding(FindingCode.BUDGET_UNREADABLE, problem))
    if node_limit_reached(obs):
        found.append(
            finding(
                FindingCode.NODE_LIMIT_REACHED,
                f"status.resources.nodes is {obs.resources.get(NODES, 0) // _ONE_NODE} of "
                f"spec.limits.nodes {obs.limits[NODES] // _ONE_NODE}: no room for a surge node",
            )
        )
    return tuple(found)
