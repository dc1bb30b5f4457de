"""The check use case: parsed inputs, one typed result per policy, and its JSON report."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fleetgate.apps.policyfile import load_policy
from fleetgate.apps.services.check import (
    BUDGET_SPAN,
    CheckInputs,
    check,
    check_all,
    parse_expire_after,
    parse_grace_period,
    seconds,
)
from fleetgate.domain.durations import DurationError
from fleetgate.domain.rotation.budgets import budgets_from_spec
from fleetgate.domain.rotation.findings import FindingCode
from fleetgate.domain.rotation.policy import PolicyError
from fleetgate.domain.rotation.windows import MaintenanceWindow
from tests.apps.controller.world import policy

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
WEEKLY = (MaintenanceWindow("UTC", ("Sun",), "01:00", "02:30"),)
START = datetime(2024, 1, 1, 0, 0, 42, tzinfo=UTC)


def test_expire_after_is_a_positive_duration_or_never() -> None:
    assert parse_expire_after("14d") == timedelta(days=14)
    assert parse_expire_after(" Never ") is None
    with pytest.raises(DurationError, match="greater than 0"):
        parse_expire_after("0s")
    with pytest.raises(DurationError):
        parse_expire_after("soon")


def test_a_grace_period_is_unset_or_not_negative() -> None:
    assert parse_grace_period(None) is None
    assert parse_grace_period("0s") == timedelta(0)
    with pytest.raises(DurationError, match="must not be negative"):
        parse_grace_period("-1h")


def test_the_result_carries_the_domains_derivation_and_reports_it_in_seconds() -> None:
    tokyo = load_policy(EXAMPLES / "tokyo-policy.yaml")
    result = check(tokyo, CheckInputs(timedelta(days=14), timedelta(hours=1), 10))
    expected = tokyo.resolve(timedelta(hours=1)).derive(timedelta(days=14), 10)
    assert result.derivation == expected and result.budgets is None
    report = result.report()
    assert report["tRot"] == expected.t_rot.total_seconds()
    assert report["G"] == expected.guaranteed_chances and report["C"] == expected.capacity
    assert report["findings"] == [f.as_dict() for f in expected.findings]
    assert "budgets" not in report


def test_a_fatal_finding_makes_the_result_fatal_and_a_warning_does_not() -> None:
    weekly = policy(windows=WEEKLY, k=2)
    fatal = check(weekly, CheckInputs(timedelta(days=7), timedelta(hours=1), 40))
    assert fatal.fatal and FindingCode.A_NON_POSITIVE in {f.code for f in fatal.findings}
    fine = check(policy(windows=WEEKLY, k=1), CheckInputs(timedelta(days=60), None, 1))
    assert not fine.fatal and fine.findings == fine.derivation.findings


def test_budgets_are_laid_over_the_weeks_from_the_minute_of_start() -> None:
    budgets = budgets_from_spec([{"nodes": "0", "schedule": "0 0 * * *", "duration": "24h"}])
    inputs = CheckInputs(timedelta(days=14), timedelta(hours=1), 5, budgets, START)
    result = check(policy(windows=WEEKLY, k=1), inputs)
    assert result.budgets is not None
    starts = [w.start for w in result.budgets.windows]
    assert starts and all(START.replace(second=0) <= s < START + BUDGET_SPAN for s in starts)
    # No disruption allowed, ever: no window is left, and both the result and the report say so.
    assert result.budgets.effective == () and result.budgets.findings
    assert set(result.findings) >= set(result.budgets.findings)
    assert result.report()["budgets"]["effectiveWindows"] == []


def test_budgets_need_the_instant_they_start_from() -> None:
    budgets = budgets_from_spec(None)
    with pytest.raises(ValueError, match="start"):
        check(policy(windows=WEEKLY), CheckInputs(timedelta(days=14), None, 1, budgets))


def test_every_policy_is_checked_and_a_bad_one_is_a_policy_error() -> None:
    good = policy(windows=WEEKLY, k=1)
    inputs = CheckInputs(timedelta(days=60), None, 3)
    assert [r.policy for r in check_all([good, good], inputs)] == [good, good]
    bad = policy("bad", windows=WEEKLY, failure_pause=timedelta(0))
    with pytest.raises(PolicyError, match="failurePause"):
        check_all([good, bad], inputs)


def test_seconds_are_whole_when_whole_and_exact_otherwise() -> None:
    assert seconds(None) is None
    assert seconds(timedelta(minutes=2)) == 120 and isinstance(seconds(timedelta(minutes=2)), int)
    assert seconds(timedelta(milliseconds=1500)) == 1.5
