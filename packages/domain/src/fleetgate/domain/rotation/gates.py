"""The start gates' values: reason codes, a closed gate, the pool marks they read.

The gates themselves, in their order, are one list: ``gating.START_GATES`` (spec §7.2 step 4,
docs/rotation.md § 6). This module holds what the list and its readers share: the public reason
codes, :class:`Blocked` (a closed gate, and ``until``: when that gate alone opens by itself; None
when only a change in the cluster opens it), :class:`Gated` (what the list decided), the
annotations the time gates read (:class:`PoolMarks`), and the disruption budgets' judgement
(:func:`budget_gate`, on plain counts).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from fleetgate.domain.rotation.actions import Action
from fleetgate.domain.rotation.annotations import (
    FREEZE,
    LAST_FAILURE_AT,
    LAST_ROTATION_AT,
    read_timestamp,
)
from fleetgate.domain.rotation.selection import ClaimView

__all__ = [
    "NO_ELIGIBLE_CLAIM",
    "Blocked",
    "GateReason",
    "Gated",
    "PoolMarks",
]

NO_ELIGIBLE_CLAIM = "noEligibleClaim"
"""Reason logged when every gate is open but no claim is eligible (spec §7.2 step 5)."""


class GateReason(StrEnum):
    """Public reason codes of a blocked start (the order they are checked in is the list's,
    ``gating.START_GATES``)."""

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


@dataclass(frozen=True)
class Gated:
    """What the start gates decided: the claim that may start (None when one is closed or no
    claim is eligible), the first closed gate (None: every gate is open), and the events a gate
    announced on the way (the ledger gate's held claims)."""

    claim: ClaimView | None
    blocked: Blocked | None = None
    announced: tuple[Action, ...] = ()
