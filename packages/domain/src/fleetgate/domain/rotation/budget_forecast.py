"""The forecast under a NodePool's disruption budgets: windows the budgets shrink or close.

A budget that applies to every reason and allows no disruption (``nodes: "0"``) closes the start
gate while it is active (gate ``disruptionBudget``), so the part of a maintenance window it
covers is not usable. Over a span of concrete instants this module takes the windows, removes
those parts, and derives again from what is left: D becomes the shortest usable stretch, P the
longest time from one usable stretch's start to the next. A window left with nothing usable, and
an A, G or C the budgets make worse (or a finding they add), are reported.

Budgets whose value depends on the pool's size or on disruptions under way cannot be known ahead
of time; only the ``"0"``/``"0%"`` ones are forecast (the gate still counts the others live).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from itertools import pairwise

from fleetgate.domain.durations import format_duration as fmt
from fleetgate.domain.rotation.budgets import Budget, blocked_intervals
from fleetgate.domain.rotation.derive import Derivation, derive
from fleetgate.domain.rotation.findings import Finding, FindingCode, finding
from fleetgate.domain.rotation.policy import ResolvedPolicy
from fleetgate.domain.rotation.windows import Interval

__all__ = ["BudgetForecast", "forecast_budgets"]

_STAMP = "%Y-%m-%dT%H:%MZ"


@dataclass(frozen=True)
class BudgetForecast:
    """The windows of a span as the budgets leave them, and what that does to the derivation."""

    windows: tuple[Interval, ...]
    """The maintenance windows (exclusions removed) over the span."""
    effective: tuple[Interval, ...]
    """The same, with the budgets' blocked stretches removed: when a rotation may start."""
    unusable: tuple[Interval, ...]
    """Windows the budgets block from end to end."""
    derivation: Derivation | None
    """The derivation over the effective windows (None: the budgets change nothing)."""
    findings: tuple[Finding, ...]


def forecast_budgets(
    policy: ResolvedPolicy,
    budgets: Sequence[Budget],
    expire_after: timedelta | None,
    node_count: int,
    start: datetime,
    end: datetime,
) -> BudgetForecast:
    """Forecast ``policy``'s windows over ``[start, end)`` under ``budgets``."""
    windows = policy.schedule.open_intervals(start, end)
    blocked = blocked_intervals(budgets, start, end)
    effective: list[Interval] = []
    unusable: list[Interval] = []
    for window in windows:
        pieces = _subtract(window, blocked)
        if not pieces:
            unusable.append(window)
        effective.extend(pieces)
    if effective == windows:
        return BudgetForecast(tuple(windows), tuple(effective), (), None, ())
    base = policy.derive(expire_after, node_count)
    found: list[Finding] = [
        finding(
            FindingCode.BUDGET_BLOCKS_WINDOW,
            f"the NodePool's disruption budgets allow no disruption in all of the window "
            f"{w.start.strftime(_STAMP)}-{w.end.strftime(_STAMP)}: no rotation can start in it",
        )
        for w in unusable
    ]
    derivation = None
    if effective:
        inputs = base.inputs
        derivation = derive(
            replace(
                inputs,
                period=max(inputs.period, _period(effective)),
                window_len=min(p.length for p in effective),
                idle_gap=_gap(effective, inputs.idle_gap),
            )
        )
        worse = (
            derivation.age_threshold < base.age_threshold
            or derivation.guaranteed_chances < base.guaranteed_chances
            or derivation.capacity < base.capacity
        )
        if worse:
            found.append(
                finding(
                    FindingCode.BUDGET_SHRINKS_WINDOWS,
                    "the NodePool's disruption budgets shrink the usable windows: "
                    f"A {fmt(base.age_threshold)} -> {fmt(derivation.age_threshold)}, "
                    f"G {base.guaranteed_chances} -> {derivation.guaranteed_chances}, "
                    f"C {base.capacity} -> {derivation.capacity}",
                )
            )
        new = [f for f in derivation.findings if f.code not in base.codes]
        found += [replace(f, message=f"under the disruption budgets: {f.message}") for f in new]
    elif windows:
        found.append(
            finding(
                FindingCode.BUDGET_SHRINKS_WINDOWS,
                "the NodePool's disruption budgets leave no usable window in the span",
            )
        )
    return BudgetForecast(
        tuple(windows), tuple(effective), tuple(unusable), derivation, tuple(found)
    )


def _subtract(window: Interval, blocked: Sequence[tuple[datetime, datetime]]) -> list[Interval]:
    """The parts of ``window`` no blocked span covers."""
    pieces = [window]
    for begin, finish in blocked:
        rest: list[Interval] = []
        for piece in pieces:
            if finish <= piece.start or begin >= piece.end:
                rest.append(piece)
                continue
            if piece.start < begin:
                rest.append(Interval(piece.start, begin))
            if finish < piece.end:
                rest.append(Interval(finish, piece.end))
        pieces = rest
    return pieces


def _period(pieces: Sequence[Interval]) -> timedelta:
    """The longest time from one usable stretch's start to the next one's."""
    starts = [p.start for p in pieces]
    return max((b - a for a, b in pairwise(starts)), default=timedelta(0))


def _gap(pieces: Sequence[Interval], base: timedelta | None) -> timedelta | None:
    """The shortest closed stretch between usable stretches (never longer than the base's)."""
    gaps = [b.start - a.end for a, b in pairwise(pieces) if b.start > a.end]
    if not gaps:
        return base
    return min(gaps) if base is None else min(min(gaps), base)
