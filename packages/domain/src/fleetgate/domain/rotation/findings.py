"""Finding codes of the schedule derivation (spec §4.1), each with its severity and side.

The *side* is the containment boundary of ADR-0002/0003: ``deadline`` findings come from the
upper bounds that keep a node ahead of its forced expiry (t_rot, A, G) and may block starts when
fatal; ``forecast`` findings come from the throughput estimates and can only ever warn. An
estimate (drainEstimate, provisioningEstimate) can move forecast findings and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "BUDGET_CODES",
    "CLASSIFICATION",
    "POOL_STATE_CODES",
    "Finding",
    "FindingCode",
    "Severity",
    "Side",
    "finding",
]


class Severity(StrEnum):
    """How bad a finding is: a fatal one stops new rotations in the pool."""

    WARN = "warn"
    FATAL = "fatal"


class Side(StrEnum):
    """Which half of the derivation raised a finding (see the module docstring)."""

    DEADLINE = "deadline"
    FORECAST = "forecast"


class FindingCode(StrEnum):
    """Every finding the derivation can report; the strings are public (events, JSON)."""

    DRAIN_ESTIMATE_ABOVE_TGP = "DrainEstimateAboveTGP"
    PROVISIONING_ESTIMATE_ABOVE_READY_TIMEOUT = "ProvisioningEstimateAboveReadyTimeout"
    NO_WINDOWS = "NoWindows"
    K_BELOW_ONE = "KBelowOne"
    K_BELOW_TWO = "KBelowTwo"
    OVERRIDE_NON_POSITIVE = "OverrideNonPositive"
    OVERRIDE_G_BELOW_ONE = "OverrideGBelowOne"
    OVERRIDE_G_BELOW_K = "OverrideGBelowK"
    A_NON_POSITIVE = "ANonPositive"
    A_VERY_AGGRESSIVE = "AVeryAggressive"
    TGP_UNSET = "TGPUnset"
    HARD_CAP_EXCEEDED = "HardCapExceeded"
    RETRY_BACKOFF_SHORT = "RetryBackoffShort"
    THROUGHPUT_BELOW_ARRIVAL = "ThroughputBelowArrival"
    THROUGHPUT_BURST_SHORTFALL = "ThroughputBurstShortfall"
    ROTATION_SPANS_NEXT_WINDOW = "RotationSpansNextWindow"
    # The NodePool's disruption budgets over the windows (``budget_forecast``).
    BUDGET_BLOCKS_WINDOW = "BudgetBlocksWindow"
    BUDGET_SHRINKS_WINDOWS = "BudgetShrinksWindows"
    # The NodePool's own state (``disruption.pool_findings``), not the derivation's numbers.
    STATIC_NODE_POOL = "StaticNodePool"
    NODE_POOL_NOT_READY = "NodePoolNotReady"
    NODE_LIMIT_REACHED = "NodeLimitReached"
    BUDGET_UNREADABLE = "BudgetUnreadable"


POOL_STATE_CODES = frozenset(
    {
        FindingCode.STATIC_NODE_POOL,
        FindingCode.NODE_POOL_NOT_READY,
        FindingCode.NODE_LIMIT_REACHED,
        FindingCode.BUDGET_UNREADABLE,
    }
)
"""Codes about the NodePool's own state: reported with the derivation's, never raised by it."""

BUDGET_CODES = frozenset({FindingCode.BUDGET_BLOCKS_WINDOW, FindingCode.BUDGET_SHRINKS_WINDOWS})
"""Codes of the forecast under a NodePool's disruption budgets (``budget_forecast``), never
raised by the derivation itself."""

_W, _F = Severity.WARN, Severity.FATAL
_D, _E = Side.DEADLINE, Side.FORECAST

CLASSIFICATION: dict[FindingCode, tuple[Severity, Side]] = {
    FindingCode.DRAIN_ESTIMATE_ABOVE_TGP: (_W, _E),
    FindingCode.PROVISIONING_ESTIMATE_ABOVE_READY_TIMEOUT: (_W, _E),
    FindingCode.NO_WINDOWS: (_F, _D),
    FindingCode.K_BELOW_ONE: (_F, _D),
    FindingCode.K_BELOW_TWO: (_W, _D),
    FindingCode.OVERRIDE_NON_POSITIVE: (_F, _D),
    FindingCode.OVERRIDE_G_BELOW_ONE: (_F, _D),
    FindingCode.OVERRIDE_G_BELOW_K: (_W, _D),
    FindingCode.A_NON_POSITIVE: (_F, _D),
    FindingCode.A_VERY_AGGRESSIVE: (_W, _D),
    FindingCode.TGP_UNSET: (_W, _D),
    FindingCode.HARD_CAP_EXCEEDED: (_W, _D),
    FindingCode.RETRY_BACKOFF_SHORT: (_W, _D),
    FindingCode.THROUGHPUT_BELOW_ARRIVAL: (_W, _E),
    FindingCode.THROUGHPUT_BURST_SHORTFALL: (_W, _E),
    FindingCode.ROTATION_SPANS_NEXT_WINDOW: (_W, _E),
    FindingCode.BUDGET_BLOCKS_WINDOW: (_W, _E),
    FindingCode.BUDGET_SHRINKS_WINDOWS: (_W, _E),
    FindingCode.STATIC_NODE_POOL: (_W, _D),
    FindingCode.NODE_POOL_NOT_READY: (_W, _D),
    FindingCode.NODE_LIMIT_REACHED: (_W, _D),
    FindingCode.BUDGET_UNREADABLE: (_W, _D),
}
"""Severity and side of every code: fixed per code, so they can never be reported inconsistently."""


@dataclass(frozen=True)
class Finding:
    """One problem the derivation found, with a plain-English message carrying the numbers."""

    code: FindingCode
    severity: Severity
    side: Side
    message: str

    @property
    def fatal(self) -> bool:
        """Whether this finding stops new rotations in the pool."""
        return self.severity is Severity.FATAL

    def as_dict(self) -> dict[str, str]:
        """The JSON shape used by ``fleetgate check`` and the API."""
        return {
            "severity": self.severity.value,
            "code": self.code.value,
            "side": self.side.value,
            "message": self.message,
        }


def finding(code: FindingCode, message: str) -> Finding:
    """Build a finding with the severity and side its code always has."""
    severity, side = CLASSIFICATION[code]
    return Finding(code=code, severity=severity, side=side, message=message)
