"""A NodePool's disruption budgets (``spec.disruption.budgets``), counted as Karpenter counts them.

Checked against kubernetes-sigs/karpenter v1.14.x (``pkg/apis/v1/nodepool.go``:
``GetAllowedDisruptionsByReason``, ``Budget.GetAllowedDisruptions``, ``Budget.IsActive``;
``pkg/controllers/disruption/helpers.go``: ``BuildDisruptionBudgetMapping``):

- a budget with neither ``schedule`` nor ``duration`` is always active; one with both is active
  at ``now`` when the schedule (cron, UTC) fired in ``(now - duration, now]``;
- an active budget allows ``nodes`` disruptions: a count, or a percentage of the pool's nodes
  rounded *up* (5% of 10 nodes allows 1); an inactive one does not limit;
- the pool allows the smallest value over the budgets that apply to a reason (those listing it,
  and those listing none); with no budgets it is unlimited. A budget Karpenter cannot read
  allows none (it fails closed);
- the nodes counted are the pool's initialized ones (fleetgate: NodeClaims whose Ready condition
  is True); of those, the ones already disrupting — deleting, tainted ``karpenter.sh/disrupted``,
  or whose Node is not Ready — are taken off what the budget allows.

A NodePool without ``budgets`` gets the CRD's default, one budget of ``nodes: "10%"`` (a real API
server writes it in); an explicit empty list means no budget at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from fleetgate.domain.rotation.cron import CronError, CronSchedule, parse_cron

__all__ = [
    "DEFAULT_BUDGETS",
    "REASONS",
    "Budget",
    "BudgetError",
    "allowed",
    "blocked_intervals",
    "budgets_failing_closed",
    "budgets_from_spec",
    "next_change",
    "remaining",
]

REASONS = ("Underutilized", "Empty", "Drifted")
"""The disruption reasons a budget may list (Karpenter's ``DisruptionReason``)."""

_UNLIMITED = 2**31 - 1  # Karpenter's math.MaxInt32
_NODES = re.compile(r"^((100|[0-9]{1,2})%|[0-9]+)$")  # the CRD's pattern
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:0s)?$")  # the CRD's: hours and minutes


class BudgetError(ValueError):
    """A budget Karpenter's CRD would refuse; the message names the field."""


@dataclass(frozen=True)
class Budget:
    """One disruption budget."""

    nodes: str = "10%"
    """A count (``"0"``, ``"3"``) or a percentage (``"10%"``) of the pool's nodes."""
    schedule: CronSchedule | None = None
    duration: timedelta | None = None
    reasons: tuple[str, ...] | None = None
    """The reasons it applies to; None: every reason."""

    def is_active(self, now: datetime) -> bool:
        """Whether the budget limits disruptions at ``now``."""
        if self.schedule is None or self.duration is None:
            return True
        last = self.schedule.last_at_or_before(now)
        return last is not None and last > now - self.duration

    def value(self, node_count: int) -> int:
        """What the budget allows while active, for a pool of ``node_count`` nodes."""
        if self.nodes.endswith("%"):
            return -(-int(self.nodes[:-1]) * node_count // 100)  # rounded up, in integers
        return int(self.nodes)

    def allows(self, now: datetime, node_count: int) -> int:
        """Karpenter's ``GetAllowedDisruptions``: the value when active, else unlimited."""
        return self.value(node_count) if self.is_active(now) else _UNLIMITED

    def applies_to_every_reason(self) -> bool:
        """Whether it lists no reasons (so it limits every kind of disruption)."""
        return self.reasons is None

    def active_intervals(self, start: datetime, end: datetime) -> list[tuple[datetime, datetime]]:
        """The spans within ``[start, end)`` in which the budget is active (merged)."""
        if self.schedule is None or self.duration is None:
            return [(start, end)] if start < end else []
        spans: list[tuple[datetime, datetime]] = []
        hit = self.schedule.last_at_or_before(start)
        if hit is None or hit + self.duration <= start:
            hit = self.schedule.next_after(start)
        while hit is not None and hit < end:
            span = (max(hit, start), min(hit + self.duration, end))
            if spans and span[0] <= spans[-1][1]:
                spans[-1] = (spans[-1][0], max(spans[-1][1], span[1]))
            else:
                spans.append(span)
            hit = self.schedule.next_after(hit)
        return spans


DEFAULT_BUDGETS = (Budget(),)
"""The CRD's default when a NodePool sets no ``budgets``: 10% of the nodes, every reason."""


def allowed(
    budgets: Iterable[Budget], now: datetime, node_count: int, reason: str | None = None
) -> int:
    """The disruptions the budgets allow at ``now`` (before taking off the ones under way):
    for ``reason``, or with None only by the budgets that apply to every reason."""
    result = _UNLIMITED
    for budget in budgets:
        applies = budget.reasons is None or (reason is not None and reason in budget.reasons)
        if applies:
            result = min(result, budget.allows(now, node_count))
    return result


def remaining(
    budgets: Iterable[Budget],
    now: datetime,
    node_count: int,
    disrupting: int,
    reason: str | None = None,
) -> int:
    """What is left once the disruptions under way are counted (never below 0)."""
    return max(allowed(budgets, now, node_count, reason) - disrupting, 0)


def next_change(budgets: Iterable[Budget], now: datetime) -> datetime | None:
    """The first instant after ``now`` at which a scheduled budget starts or stops being active
    (None: none is scheduled)."""
    instants = [
        _change(b, b.schedule, b.duration, now) for b in budgets if b.schedule and b.duration
    ]
    return min((t for t in instants if t is not None), default=None)


_CHAIN = 10_000  # a schedule firing more often than its duration is active for good


def _change(
    budget: Budget, schedule: CronSchedule, duration: timedelta, now: datetime
) -> datetime | None:
    """When ``budget`` next turns on (inactive now) or off (active now)."""
    if not budget.is_active(now):
        return schedule.next_after(now)
    last = schedule.last_at_or_before(now)
    assert last is not None  # active, so it fired
    end = last + duration
    for _ in range(_CHAIN):
        following = schedule.next_after(last)
        if following is None or following > end:
            return end
        last, end = following, following + duration
    return None


def blocked_intervals(
    budgets: Sequence[Budget], start: datetime, end: datetime
) -> list[tuple[datetime, datetime]]:
    """The spans within ``[start, end)`` in which a budget that applies to every reason allows
    no disruption whatever the pool's size (``nodes`` "0" or "0%"), merged and in order."""
    spans: list[tuple[datetime, datetime]] = []
    for budget in budgets:
        if budget.applies_to_every_reason() and budget.value(10**6) == 0:
            spans.extend(budget.active_intervals(start, end))
    spans.sort()
    merged: list[tuple[datetime, datetime]] = []
    for begin, finish in spans:
        if merged and begin <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], finish))
        else:
            merged.append((begin, finish))
    return merged


def budgets_from_spec(value: object, path: str = "spec.disruption.budgets") -> tuple[Budget, ...]:
    """Read ``spec.disruption.budgets`` (a list of mappings) as the CRD validates it; None (the
    field absent) gives the CRD's default."""
    if value is None:
        return DEFAULT_BUDGETS
    if not isinstance(value, list):
        raise BudgetError(f"{path}: must be a list, got {type(value).__name__}")
    return tuple(_budget(item, f"{path}[{i}]") for i, item in enumerate(value))


def budgets_failing_closed(value: object) -> tuple[Budget, ...]:
    """``spec.disruption.budgets`` of a live NodePool as Karpenter uses it: a budget it cannot
    read (a cron the CRD's pattern let through, say) allows no disruption for its reasons."""
    if not isinstance(value, list):
        return budgets_from_spec(value) if value is None else (Budget(nodes="0"),)
    out = []
    for i, item in enumerate(value):
        try:
            out.append(_budget(item, f"budgets[{i}]"))
        except BudgetError:
            try:
                reasons = _reasons(item.get("reasons"), "") if isinstance(item, Mapping) else None
            except BudgetError:
                reasons = None
            out.append(Budget(nodes="0", reasons=reasons))
    return tuple(out)


def _budget(item: object, path: str) -> Budget:
    if not isinstance(item, Mapping):
        raise BudgetError(f"{path}: must be a mapping, got {type(item).__name__}")
    unknown = sorted(set(item) - {"nodes", "schedule", "duration", "reasons"})
    if unknown:
        raise BudgetError(f"{path}.{unknown[0]}: unknown field")
    nodes = item.get("nodes", "10%")
    if isinstance(nodes, int) and not isinstance(nodes, bool):
        nodes = str(nodes)
    if not isinstance(nodes, str) or not _NODES.match(nodes):
        raise BudgetError(f"{path}.nodes: must be a count or a percentage 0-100%, got {nodes!r}")
    schedule_text, duration_text = item.get("schedule"), item.get("duration")
    if (schedule_text is None) != (duration_text is None):
        raise BudgetError(f"{path}: 'schedule' must be set with 'duration'")
    schedule = duration = None
    if schedule_text is not None:
        if not isinstance(schedule_text, str):
            raise BudgetError(f"{path}.schedule: must be a string")
        try:
            schedule = parse_cron(schedule_text, f"{path}.schedule")
        except CronError as error:
            raise BudgetError(str(error)) from None
        duration = _duration(duration_text, f"{path}.duration")
    return Budget(nodes, schedule, duration, _reasons(item.get("reasons"), f"{path}.reasons"))


def _duration(value: object, path: str) -> timedelta:
    match = _DURATION.match(value) if isinstance(value, str) else None
    if match is None or not (match.group(1) or match.group(2)):
        raise BudgetError(
            f"{path}: must be hours and/or minutes such as 8h or 1h30m, got {value!r}"
        )
    try:
        return timedelta(hours=int(match.group(1) or 0), minutes=int(match.group(2) or 0))
    except OverflowError:
        raise BudgetError(f"{path}: {value!r} is too long") from None


def _reasons(value: object, path: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise BudgetError(f"{path}: must be a list")
    for reason in value:
        if reason not in REASONS:
            raise BudgetError(f"{path}: {reason!r} is not one of {', '.join(REASONS)}")
    return tuple(value)
