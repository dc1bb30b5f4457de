"""The check use case: can a policy's windows rotate a pool before Karpenter's forced expiry?

One definition of the check's inputs (:func:`parse_expire_after`, :func:`parse_grace_period`,
``nodes``) and of its answer (:class:`CheckResult`, whose :meth:`CheckResult.report` is the JSON
object ``fleetgate check --format json`` prints and ``POST /v1/rotation/check`` answers). The
numbers come from the domain (:meth:`ResolvedPolicy.derive`); the CLI, the API and the What-if
page only present the result. Imports nothing heavier than the domain: ``fleetgate check``
starts fast.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from fleetgate.domain.durations import DurationError, parse_duration
from fleetgate.domain.rotation.annotations import format_timestamp
from fleetgate.domain.rotation.budget_forecast import BudgetForecast, forecast_budgets
from fleetgate.domain.rotation.budgets import Budget
from fleetgate.domain.rotation.derive import Derivation
from fleetgate.domain.rotation.findings import Finding
from fleetgate.domain.rotation.formulas import input_record
from fleetgate.domain.rotation.policy import ResolvedPolicy, RotationPolicy
from fleetgate.domain.rotation.windows import Interval

__all__ = [
    "BUDGET_SPAN",
    "NEVER",
    "CheckInputs",
    "CheckResult",
    "check",
    "check_all",
    "parse_expire_after",
    "parse_grace_period",
    "seconds",
]

NEVER = "Never"
BUDGET_SPAN = timedelta(days=28)
"""How far ahead a NodePool's disruption budgets are laid over the windows."""


def parse_expire_after(text: str) -> timedelta | None:
    """``expireAfter``: a positive duration, or ``Never`` (None)."""
    if text.strip() == NEVER:
        return None
    value = parse_duration(text)
    if value <= timedelta(0):
        raise DurationError(f"must be greater than 0 (or {NEVER}), got {text!r}")
    return value


def parse_grace_period(text: str | None) -> timedelta | None:
    """``terminationGracePeriod``: a duration >= 0, or None when omitted (unset)."""
    if text is None:
        return None
    value = parse_duration(text)
    if value < timedelta(0):
        raise DurationError(f"must not be negative, got {text!r}")
    return value


@dataclass(frozen=True)
class CheckInputs:
    """The pool a policy is checked against (its durations already parsed)."""

    expire_after: timedelta | None
    termination_grace_period: timedelta | None
    nodes: int
    budgets: tuple[Budget, ...] | None = None
    """The NodePool's disruption budgets, laid over the windows from ``start`` on (None: not)."""
    start: datetime | None = None


@dataclass(frozen=True)
class CheckResult:
    """One policy's answer: its resolution, the derivation, and the budgets' forecast if asked."""

    policy: RotationPolicy
    resolved: ResolvedPolicy
    derivation: Derivation
    budgets: BudgetForecast | None = None

    @property
    def findings(self) -> tuple[Finding, ...]:
        """Every finding: the derivation's, then the budgets'."""
        extra = () if self.budgets is None else tuple(self.budgets.findings)
        return (*self.derivation.findings, *extra)

    @property
    def fatal(self) -> bool:
        """Whether no rotation will start in the pool (a fatal finding of the derivation)."""
        return self.derivation.fatal

    def report(self) -> dict[str, Any]:
        """The JSON object of ``fleetgate check --format json`` (and the API's answer)."""
        d = self.derivation
        out: dict[str, Any] = {
            "inputs": input_record(d.inputs, self.resolved.failure_pause, seconds),
            "tRot": seconds(d.t_rot),
            "tRotEst": seconds(d.t_rot_est),
            "drainEstimate": seconds(d.drain_estimate),
            "provisioningEstimate": seconds(d.provisioning_estimate),
            "leadTime": seconds(d.lead_time),
            "A": seconds(d.age_threshold),
            "G": d.guaranteed_chances,
            "C": d.capacity,
            "findings": [f.as_dict() for f in d.findings],
        }
        if self.budgets is not None:
            out["budgets"] = budget_report(self.budgets)
        return out


def check(policy: RotationPolicy, inputs: CheckInputs) -> CheckResult:
    """Check one policy; raises PolicyError (naming the fields) when it does not resolve."""
    resolved = policy.resolve(inputs.termination_grace_period)
    derivation = resolved.derive(inputs.expire_after, inputs.nodes)
    forecast = None
    if inputs.budgets is not None:
        if inputs.start is None:
            raise ValueError("start: required with budgets")
        start = inputs.start.replace(second=0, microsecond=0)
        forecast = forecast_budgets(
            resolved,
            inputs.budgets,
            inputs.expire_after,
            inputs.nodes,
            start,
            start + BUDGET_SPAN,
        )
    return CheckResult(policy, resolved, derivation, forecast)


def check_all(policies: Sequence[RotationPolicy], inputs: CheckInputs) -> list[CheckResult]:
    """Check each policy, in order; raises PolicyError for the first that does not resolve."""
    return [check(p, inputs) for p in policies]


def seconds(value: timedelta | None) -> int | float | None:
    """A duration in seconds: an integer when whole, None when undefined."""
    if value is None:
        return None
    whole, rest = divmod(value, timedelta(seconds=1))
    return int(whole) if not rest else value.total_seconds()


def budget_report(f: BudgetForecast) -> dict[str, Any]:
    """The ``budgets`` member of the JSON report: the windows as the budgets leave them."""

    def spans(intervals: tuple[Interval, ...]) -> list[dict[str, str]]:
        return [
            {"start": format_timestamp(i.start), "end": format_timestamp(i.end)} for i in intervals
        ]

    out: dict[str, Any] = {
        "windows": spans(f.windows),
        "effectiveWindows": spans(f.effective),
        "unusableWindows": spans(f.unusable),
        "findings": [x.as_dict() for x in f.findings],
    }
    if f.derivation is not None:
        d = f.derivation
        out |= {"A": seconds(d.age_threshold), "G": d.guaranteed_chances, "C": d.capacity}
    return out
