"""Start gates (spec §7.2 step 4): may a NodePool start a rotation right now?

Gates only decide *starts*; an anchored rotation always continues. They are checked in a fixed
order and the first that blocks is reported, with its public reason code:

1. ``outOfWindow`` — no maintenance window is open;
2. ``excluded`` — a window is open but a dated exclusion covers now (fleetgate's addition; it sits
   right after ``outOfWindow`` because it is the same question — is this a time to rotate at all?
   — and should be reported before operator markers such as ``frozen``);
3. ``frozen`` — the pool's ``freeze`` annotation parses and now is before it;
4. ``cooldownAfterSuccess`` — now − ``last-rotation-at`` < cooldownAfter;
5. ``failurePause`` — now − ``last-failure-at`` < failurePause;
6. ``staticNodePool`` — the NodePool sets ``spec.replicas``: Karpenter will not provision a
   surge node for a pending placeholder there (and replaces a deleted claim only afterwards);
7. ``nodePoolNotReady`` — the NodePool's Ready condition is not True: no node comes from it;
8. ``disruptionBudget`` — the NodePool's disruption budgets that apply to every reason allow no
   disruption now, counted as Karpenter counts them (see budgets.py: the pool's nodes already
   deleting, being disrupted or NotReady use the budget up). Skipped when the policy sets
   ``ignoreDisruptionBudgets``. The machine checks it last, and only when a claim is eligible:
   with none, the census is the answer to "why not?".

9. ``ledgerCapacity`` — with the node sync on, the capacity ledger has no room for the
   placements of the node the rotation would drain (ledger_gate.py: the next eligible claim whose
   node fits is started instead; only when none fits is the pool held). Checked after gate 8,
   and only when the shell has the ledger's verdicts.

Gates 6 and 7 (:func:`pool_state_gate`) read the NodePool itself and never clear by themselves
(``until`` None); a watch on the NodePool brings the next pass when they change. Gate 8
(:func:`budget_gate`) clears by itself when a scheduled budget turns off (``until``), or when a
disruption under way ends (a change the watches bring).

Absent or malformed timestamps never block. Each blocked result also says ``until``: when that
gate (only that one) clears by itself; None when it never will (no window ever opens).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from fleetgate.domain.rotation.annotations import (
    FREEZE,
    LAST_FAILURE_AT,
    LAST_ROTATION_AT,
    read_timestamp,
)
from fleetgate.domain.rotation.budgets import Budget, next_change, remaining
from fleetgate.domain.rotation.policy import ResolvedPolicy
from fleetgate.domain.rotation.windows import Schedule

__all__ = [
    "NO_ELIGIBLE_CLAIM",
    "Blocked",
    "GateReason",
    "PoolMarks",
    "budget_gate",
    "check_gates",
    "pool_state_gate",
    "start_gate",
]

NO_ELIGIBLE_CLAIM = "noEligibleClaim"
"""Reason logged when every gate is open but no claim is eligible (spec §7.2 step 5)."""


class GateReason(StrEnum):
    """Public reason codes of a blocked start, in the order they are checked."""

    OUT_OF_WINDOW = "outOfWindow"
    EXCLUDED = "excluded"
    FROZEN = "frozen"
    COOLDOWN_AFTER_SUCCESS = "cooldownAfterSuccess"
    FAILURE_PAUSE = "failurePause"
    STATIC_NODE_POOL = "staticNodePool"
    NODE_POOL_NOT_READY = "nodePoolNotReady"
    DISRUPTION_BUDGET = "disruptionBudget"
    """The NodePool's budgets for every reason allow no disruption now: see budgets.py."""
    REFERENCE_CONTROLLER_ACTIVE = "referenceControllerActive"
    """The reference controller (noderotation.io) is acting on the pool: see reference.py."""
    LEDGER_CAPACITY = "ledgerCapacity"
    """The capacity ledger has no room for the candidate's placements: see ledger_gate.py."""


@dataclass(frozen=True)
class PoolMarks:
    """The NodePool annotations the gates read, already parsed (None = absent or malformed)."""

    freeze: datetime | None = None
    last_rotation_at: datetime | None = None
    last_failure_at: datetime | None = None

    @classmethod
    def from_annotations(cls, annotations: Mapping[str, str]) -> PoolMarks:
        """Read the marks from a NodePool's annotations."""
        return cls(
            freeze=read_timestamp(annotations, FREEZE),
            last_rotation_at=read_timestamp(annotations, LAST_ROTATION_AT),
            last_failure_at=read_timestamp(annotations, LAST_FAILURE_AT),
        )


@dataclass(frozen=True)
class Blocked:
    """A start gate that is closed: which one, and when it opens by itself (if known)."""

    reason: GateReason
    until: datetime | None


def start_gate(now: datetime, policy: ResolvedPolicy, marks: PoolMarks) -> Blocked | None:
    """The first closed start gate at ``now``, or None when a rotation may start."""
    return check_gates(now, policy.schedule, marks, policy.cooldown_after, policy.failure_pause)


def check_gates(
    now: datetime,
    schedule: Schedule,
    marks: PoolMarks,
    cooldown_after: timedelta,
    failure_pause: timedelta,
) -> Blocked | None:
    """:func:`start_gate` on explicit values (for callers without a resolved policy)."""
    if not schedule.in_window(now):
        return Blocked(GateReason.OUT_OF_WINDOW, schedule.next_transition(now, exclusions=False))
    exclusion = schedule.exclusion_at(now)
    if exclusion is not None:
        return Blocked(GateReason.EXCLUDED, exclusion.end)
    if marks.freeze is not None and now < marks.freeze:
        return Blocked(GateReason.FROZEN, marks.freeze)
    if marks.last_rotation_at is not None and now - marks.last_rotation_at < cooldown_after:
        return Blocked(GateReason.COOLDOWN_AFTER_SUCCESS, marks.last_rotation_at + cooldown_after)
    if marks.last_failure_at is not None and now - marks.last_failure_at < failure_pause:
        return Blocked(GateReason.FAILURE_PAUSE, marks.last_failure_at + failure_pause)
    return None


def pool_state_gate(static: bool, ready: bool) -> Blocked | None:
    """Gates 6 and 7: a static or not-Ready NodePool cannot surge, so no rotation starts."""
    if static:
        return Blocked(GateReason.STATIC_NODE_POOL, None)
    if not ready:
        return Blocked(GateReason.NODE_POOL_NOT_READY, None)
    return None


def budget_gate(
    budgets: Sequence[Budget], now: datetime, node_count: int, disrupting: int
) -> Blocked | None:
    """Gate 8: the budgets that apply to every reason leave no disruption at ``now``."""
    if not budgets or remaining(budgets, now, node_count, disrupting) > 0:
        return None
    every = [b for b in budgets if b.applies_to_every_reason()]
    return Blocked(GateReason.DISRUPTION_BUDGET, next_change(every, now))
