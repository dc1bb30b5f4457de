"""The start gates: one list, in the order they are asked (spec §7.2 step 4, docs/rotation.md § 6).

A rotation starts only when every gate is open. :data:`START_GATES` is the only list of them:
before a start the machine asks it in order (:func:`start_gates`), before a failed rotation is
retried it asks the entries marked ``on_retry`` (:func:`retry_gates`), and the first closed gate
holds the pass back and is reported with its public reason code. A new gate is one entry.

Gates only decide *starts*; an anchored rotation always continues. A gate marked
``needs_claim`` is asked only about a claim that could start: the disruption budget (with no
eligible claim the census is the better answer to "why not?", and the walk over the pool that
counting the budget takes is spared) and the ledger gate, which may let the next eligible claim
through in place of the one asked about (ledger_gate.py). A retry always has its claim.

Absent or malformed timestamps never block. Each closed gate also says ``until``: when that gate
(only that one) opens by itself; None when it never does by time alone (no window ever opens,
or only a change in the cluster opens it, which a watch brings).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fleetgate.domain.rotation.actions import Action
from fleetgate.domain.rotation.budgets import next_change, remaining
from fleetgate.domain.rotation.cluster import NodeClaimView
from fleetgate.domain.rotation.context import Pass
from fleetgate.domain.rotation.disruption import budget_counts
from fleetgate.domain.rotation.gates import Blocked, Gated, GateReason
from fleetgate.domain.rotation.ledger_gate import ledger_gate
from fleetgate.domain.rotation.reference import REFERENCE_ACTIVE_ROTATION, reference_activity
from fleetgate.domain.rotation.selection import Bucket, ClaimView

__all__ = ["RETRY_GATES", "START_GATES", "StartGate", "retry_gates", "start_gates"]

GateCheck = Callable[[Pass, ClaimView | None], Blocked | Gated | None]
"""A gate's question: None when it is open for the claim asked about, a :class:`Blocked` when
it is closed, or (the ledger gate) a :class:`Gated` naming another claim to start instead."""


@dataclass(frozen=True)
class StartGate:
    """One entry of the list: the reason code it reports, its question, and when it is asked."""

    reason: GateReason
    check: GateCheck
    on_retry: bool = True
    """Also asked before a failed rotation of the anchored claim is retried."""
    needs_claim: bool = False
    """Asked only when a claim could start (a retry always has one)."""


def _reference_controller_active(p: Pass, claim: ClaimView | None) -> Blocked | None:
    """The reference controller acts on the pool (reference.py: its anchor, a claim in flight,
    its markers on a node); opens when it finishes, at no time known in advance. Asked first:
    it is a question of who owns the pool, not of time; a retry is of a rotation fleetgate
    already owns."""
    obs = p.obs
    # The census knows whether any claim or node carries a marker, sparing the walk.
    if not p.census.reference_marked and not obs.annotations.get(REFERENCE_ACTIVE_ROTATION):
        return None
    if reference_activity(obs) is None:
        return None
    return Blocked(GateReason.REFERENCE_CONTROLLER_ACTIVE, None)


def _out_of_window(p: Pass, claim: ClaimView | None) -> Blocked | None:
    """No maintenance window is open: closed until the next opening."""
    schedule = p.policy.schedule
    if schedule.in_window(p.now):
        return None
    return Blocked(GateReason.OUT_OF_WINDOW, schedule.next_transition(p.now, exclusions=False))


def _excluded(p: Pass, claim: ClaimView | None) -> Blocked | None:
    """A window is open but a dated exclusion covers now (fleetgate's addition: right after
    ``outOfWindow``, the same question of whether this is a time to rotate at all, and reported
    before operator marks such as ``frozen``)."""
    exclusion = p.policy.schedule.exclusion_at(p.now)
    return None if exclusion is None else Blocked(GateReason.EXCLUDED, exclusion.end)


def _frozen(p: Pass, claim: ClaimView | None) -> Blocked | None:
    """The pool's ``freeze`` annotation parses and now is before it."""
    freeze = p.marks.freeze
    if freeze is None or p.now >= freeze:
        return None
    return Blocked(GateReason.FROZEN, freeze)


def _cooldown_after_success(p: Pass, claim: ClaimView | None) -> Blocked | None:
    """now - ``last-rotation-at`` < cooldownAfter."""
    last, cooldown = p.marks.last_rotation_at, p.policy.cooldown_after
    if last is None or p.now - last >= cooldown:
        return None
    return Blocked(GateReason.COOLDOWN_AFTER_SUCCESS, last + cooldown)


def _failure_pause(p: Pass, claim: ClaimView | None) -> Blocked | None:
    """now - ``last-failure-at`` < failurePause."""
    last, pause = p.marks.last_failure_at, p.policy.failure_pause
    if last is None or p.now - last >= pause:
        return None
    return Blocked(GateReason.FAILURE_PAUSE, last + pause)


def _static_node_pool(p: Pass, claim: ClaimView | None) -> Blocked | None:
    """The NodePool sets ``spec.replicas``: Karpenter provisions no surge node for a pending
    placeholder there (and replaces a deleted claim only afterwards). Never opens by itself."""
    return Blocked(GateReason.STATIC_NODE_POOL, None) if p.obs.static else None


def _node_pool_not_ready(p: Pass, claim: ClaimView | None) -> Blocked | None:
    """The NodePool's Ready condition is not True: no node comes from it. A watch on the
    NodePool brings the pass that finds it Ready again."""
    return None if p.obs.ready else Blocked(GateReason.NODE_POOL_NOT_READY, None)


def _disruption_budget(p: Pass, claim: ClaimView | None) -> Blocked | None:
    """The NodePool's disruption budgets that apply to every reason allow no disruption now,
    counted as Karpenter counts them (budgets.py: the pool's nodes already deleting, being
    disrupted or NotReady use the budget up); skipped when the policy ignores them. Opens when a
    scheduled budget turns off (``until``) or a disruption under way ends (a watch brings it)."""
    obs = p.obs
    if p.policy.written.ignore_disruption_budgets or not obs.budgets:
        return None
    # Most passes are decided without the walk: the census bounds the pool's Ready claims from
    # below (the buckets after NotReady hold only Ready ones; a budget allows no less for more
    # nodes) and the disruptions under way from above (deleting, being disrupted, opted out,
    # plus the Nodes not Ready); when even those leave room, the exact count cannot close it.
    counts = p.census.headcount.counts
    fewest = sum(counts.get(b, 0) for b in _READY_ONLY)
    most = sum(counts.get(b, 0) for b in _MAY_DISRUPT) + p.census.not_ready_nodes
    if remaining(obs.budgets, p.now, fewest, most) > 0:
        return None
    if remaining(obs.budgets, p.now, *budget_counts(obs)) > 0:
        return None
    every = [b for b in obs.budgets if b.applies_to_every_reason()]
    return Blocked(GateReason.DISRUPTION_BUDGET, next_change(every, p.now))


_MAY_DISRUPT = (Bucket.OPTED_OUT, Bucket.DELETING, Bucket.KARPENTER_DISRUPTING)
_READY_ONLY = (
    Bucket.IN_FLIGHT,
    Bucket.TERMINAL,
    Bucket.IN_BACKOFF,
    Bucket.NOT_TRIGGERED,
    Bucket.ELIGIBLE,
)


START_GATES: tuple[StartGate, ...] = (
    StartGate(GateReason.REFERENCE_CONTROLLER_ACTIVE, _reference_controller_active, on_retry=False),
    StartGate(GateReason.OUT_OF_WINDOW, _out_of_window),
    StartGate(GateReason.EXCLUDED, _excluded),
    StartGate(GateReason.FROZEN, _frozen),
    StartGate(GateReason.COOLDOWN_AFTER_SUCCESS, _cooldown_after_success),
    StartGate(GateReason.FAILURE_PAUSE, _failure_pause),
    StartGate(GateReason.STATIC_NODE_POOL, _static_node_pool),
    StartGate(GateReason.NODE_POOL_NOT_READY, _node_pool_not_ready),
    StartGate(GateReason.DISRUPTION_BUDGET, _disruption_budget, needs_claim=True),
    StartGate(GateReason.LEDGER_CAPACITY, ledger_gate, on_retry=False, needs_claim=True),
)
"""Every start gate, in the order they are asked and reported."""

RETRY_GATES = tuple(gate for gate in START_GATES if gate.on_retry)
"""The gates a retry of the anchored claim asks: the pool is fleetgate's already, and the
ledger judged the claim's node when the rotation started."""


def start_gates(p: Pass) -> Gated:
    """Ask every gate about the candidate: the claim to start, or the first closed gate."""
    return _ask(START_GATES, p, p.census.candidate())


def retry_gates(p: Pass, claim: NodeClaimView) -> Blocked | None:
    """The first closed gate before the failed rotation of ``claim`` may be retried (None:
    every gate a retry asks is open)."""
    return _ask(RETRY_GATES, p, claim.selection_view).blocked


def _ask(gates: tuple[StartGate, ...], p: Pass, claim: ClaimView | None) -> Gated:
    """The gates in order: the first closed one decides; a gate may hand the start to another
    claim (and announce why), which the gates after it are then asked about."""
    announced: tuple[Action, ...] = ()
    for gate in gates:
        if gate.needs_claim and claim is None:
            continue
        answer = gate.check(p, claim)
        if answer is None:
            continue
        if isinstance(answer, Blocked):
            return Gated(None, answer, announced)
        claim, announced = answer.claim, announced + answer.announced
        if answer.blocked is not None:
            return Gated(None, answer.blocked, announced)
    return Gated(claim, None, announced)
