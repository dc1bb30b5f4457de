"""Finding codes: every code has one fixed severity and side, and a stable JSON shape."""

from __future__ import annotations

import pytest

from fleetgate.domain.rotation.findings import (
    CLASSIFICATION,
    Finding,
    FindingCode,
    Severity,
    Side,
    finding,
)

DEADLINE = {
    "NoWindows": "fatal",
    "KBelowOne": "fatal",
    "KBelowTwo": "warn",
    "OverrideNonPositive": "fatal",
    "OverrideGBelowOne": "fatal",
    "OverrideGBelowK": "warn",
    "ANonPositive": "fatal",
    "AVeryAggressive": "warn",
    "TGPUnset": "warn",
    "HardCapExceeded": "warn",
    "RetryBackoffShort": "warn",
    # The NodePool's own state: warnings (the start gate is what refuses), never fatal.
    "StaticNodePool": "warn",
    "NodePoolNotReady": "warn",
    "NodeLimitReached": "warn",
    "BudgetUnreadable": "warn",  # the budget gate refuses: the unreadable budget allows none
}
FORECAST = {
    "DrainEstimateAboveTGP",
    "ProvisioningEstimateAboveReadyTimeout",
    "ThroughputBelowArrival",
    "ThroughputBurstShortfall",
    "RotationSpansNextWindow",
    "BudgetBlocksWindow",
    "BudgetShrinksWindows",
}


def test_every_code_is_classified() -> None:
    assert set(CLASSIFICATION) == set(FindingCode)
    assert {c.value for c in FindingCode} == set(DEADLINE) | FORECAST


@pytest.mark.parametrize("code", sorted(DEADLINE))
def test_deadline_codes(code: str) -> None:
    assert CLASSIFICATION[FindingCode(code)] == (Severity(DEADLINE[code]), Side.DEADLINE)


@pytest.mark.parametrize("code", sorted(FORECAST))
def test_forecast_codes_only_warn(code: str) -> None:
    # Containment: an estimate may make a warning louder or quieter, never block a pool.
    assert CLASSIFICATION[FindingCode(code)] == (Severity.WARN, Side.FORECAST)


def test_finding_takes_severity_and_side_from_its_code() -> None:
    made = finding(FindingCode.A_NON_POSITIVE, "A is -1h")
    assert made == Finding(FindingCode.A_NON_POSITIVE, Severity.FATAL, Side.DEADLINE, "A is -1h")
    assert made.fatal
    assert not finding(FindingCode.TGP_UNSET, "x").fatal


def test_json_shape() -> None:
    assert finding(FindingCode.ROTATION_SPANS_NEXT_WINDOW, "late").as_dict() == {
        "severity": "warn",
        "code": "RotationSpansNextWindow",
        "side": "forecast",
        "message": "late",
    }
