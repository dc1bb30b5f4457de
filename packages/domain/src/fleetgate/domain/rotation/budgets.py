"""A NodePool's disruption budgets (``spec.disruption.budgets``), counted as Karpenter counts them.

Checked against kubernetes-sigs/karpenter 2266468 (``pkg/apis/v1/nodepool.go``:
``MustGetAllowedDisruptions``, ``GetAllowedDisruptionsByReason``, ``Budget.GetAllowedDisruptions``,
``Budget.IsActive``, ``GetIntStrFromValue``; ``pkg/controllers/disruption/helpers.go``:
``BuildDisruptionBudgetMapping``):

- a budget with neither ``schedule`` nor ``duration`` is always active; one with both is active
  at ``now`` when the schedule (cron, UTC) fired in ``(now - duration, now]``, and also when it
  never fires at all (robfig's ``Next`` gives the zero time, which is not after ``now``);
- an active budget allows ``nodes`` disruptions: a count, or a percentage of the pool's nodes
  rounded *up* (5% of 10 nodes allows 1); an inactive one does not limit. A count is read as
  Karpenter reads it: Go's ``strconv.Atoi``, then ``intstr.FromInt``, which keeps the low 32
  bits, so 2147483648 allows -2147483648, that is none;
- the pool allows the smallest value over the budgets that apply to a reason (those listing it,
  and those listing none); with no budgets it is unlimited;
- a budget Karpenter cannot read (a schedule its CRD's pattern let through that robfig/cron
  refuses, or, while active, a count past int64) makes ``MustGetAllowedDisruptions`` answer 0
  for the whole pool, whatever the reason: it fails closed;
- the nodes counted are the pool's initialized ones (fleetgate: NodeClaims whose Ready condition
  is True) that are not already terminating their instance; of those, the ones already
  disrupting (deleting, tainted ``karpenter.sh/disrupted``, or whose Node is not Ready) are
  taken off what the budget allows.

A NodePool without ``budgets`` gets the CRD's default, one budget of ``nodes: "10%"`` (a real API
server writes it in); an explicit empty list means no budget at all. The patterns are the CRD's
(``+kubebuilder:validation:Pattern`` on ``Budget``), read with Go's regexp semantics: ``$`` is the
end of the text (a trailing newline does not pass), ``\\s`` is ASCII whitespace and ``.`` is any
character but a newline.
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
    "read_schedule",
    "remaining",
]

REASONS = ("Underutilized", "Empty", "Drifted")
"""The disruption reasons a budget may list (Karpenter's ``DisruptionReason``)."""

_UNLIMITED = 2**31 - 1  # Karpenter's math.MaxInt32
_INT32, _INT64 = 1 << 31, 1 << 63
#: The CRD's patterns, written for Python with Go's meaning (fullmatch: no trailing newline).
_NODES = re.compile(r"(100|[0-9]{1,2})%|[0-9]+")
_DURATION = re.compile(r"(?:([0-9]+)h)?(?:([0-9]+)m)?(?:0s)?")  # hours and minutes
_GO_SPACE, _GO_DOT = r"[\t\n\f\r ]", r"[^\n]"  # Go's \s and . (without the s flag)
#: ``^(@(annually|...|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$``: the first branch is anchored
#: at the start only, the second at the end only, so it admits far more than robfig reads
#: ("@hourly2", "¹ * * * *"), which Karpenter then fails closed on.
_SCHEDULE = re.compile(
    r"^(?:@(?:annually|yearly|monthly|weekly|daily|midnight|hourly))|(?:"
    + _GO_SPACE.join([f"{_GO_DOT}+"] * 5)
    + r")\Z"
)
_FAILS_CLOSED = (
    "Karpenter allows no disruption of the pool, for any reason, while it cannot read it"
)


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
        """Whether the budget limits disruptions at ``now`` (Karpenter's ``IsActive``: the
        schedule's next firing after ``now - duration`` is not after ``now``; a schedule that
        never fires has no next firing, which Karpenter reads as active)."""
        if self.schedule is None or self.duration is None:
            return True
        hit = self.schedule.next_after(now - self.duration)
        return hit is None or hit <= now

    def value(self, node_count: int) -> int:
        """What the budget allows while active, for a pool of ``node_count`` nodes (a count is
        kept to its low 32 bits, as ``intstr.FromInt`` keeps it)."""
        if self.nodes.endswith("%"):
            return -(-int(self.nodes[:-1]) * node_count // 100)  # rounded up, in integers
        return (int(self.nodes) + _INT32) % (2 * _INT32) - _INT32

    def allows(self, now: datetime, node_count: int) -> int:
        """Karpenter's ``GetAllowedDisruptions``: the value when active, else unlimited."""
        return self.value(node_count) if self.is_active(now) else _UNLIMITED

    def applies_to_every_reason(self) -> bool:
        """Whether it lists no reasons (so it limits every kind of disruption)."""
        return self.reasons is None

    def active_intervals(self, start: datetime, end: datetime) -> list[tuple[datetime, datetime]]:
        """The spans within ``[start, end)`` in which the budget is active (merged)."""
        if self.schedule is None or self.duration is None or not self.schedule.fires:
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
    if last is None:
        return None  # never fires (active for good), or last fired beyond the search
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
        if budget.applies_to_every_reason() and budget.value(10**6) <= 0:
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
    """Read ``spec.disruption.budgets`` (a list of mappings) as the CRD validates it and
    Karpenter reads it; None (the field absent) gives the CRD's default. A budget the CRD would
    refuse, or one it admits that Karpenter cannot read (it would fail closed on it), is a
    :class:`BudgetError` naming the field."""
    if value is None:
        return DEFAULT_BUDGETS
    if not isinstance(value, list):
        raise BudgetError(f"{path}: must be a list, got {type(value).__name__}")
    return tuple(_budget(item, f"{path}[{i}]") for i, item in enumerate(value))


def budgets_failing_closed(
    value: object, path: str = "spec.disruption.budgets"
) -> tuple[tuple[Budget, ...], tuple[str, ...]]:
    """``spec.disruption.budgets`` of a live NodePool as Karpenter uses it, and why any could
    not be read: a budget it cannot read allows no disruption, for every reason, while it
    applies (always, unless only its count is unreadable: then while its schedule is active)."""
    if value is None:
        return DEFAULT_BUDGETS, ()
    if not isinstance(value, list):
        problem = f"{path}: must be a list, got {type(value).__name__}; {_FAILS_CLOSED}"
        return (Budget(nodes="0"),), (problem,)
    out: list[Budget] = []
    problems: list[str] = []
    for i, item in enumerate(value):
        try:
            out.append(_budget(item, f"{path}[{i}]"))
        except _CountTooLarge as error:
            out.append(Budget("0", error.schedule, error.duration, None))
            problems.append(str(error))
        except BudgetError as error:
            out.append(Budget(nodes="0"))
            problems.append(str(error))
    return tuple(out), tuple(problems)


class _CountTooLarge(BudgetError):
    """``nodes`` past int64: Karpenter fails closed on the budget only while it is active."""

    def __init__(self, message: str, schedule: CronSchedule | None, duration: timedelta | None):
        super().__init__(message)
        self.schedule, self.duration = schedule, duration


def _budget(item: object, path: str) -> Budget:
    if not isinstance(item, Mapping):
        raise BudgetError(f"{path}: must be a mapping, got {type(item).__name__}")
    unknown = sorted(set(item) - {"nodes", "schedule", "duration", "reasons"})
    if unknown:
        raise BudgetError(f"{path}.{unknown[0]}: unknown field")
    nodes = item.get("nodes", "10%")
    if isinstance(nodes, int) and not isinstance(nodes, bool):
        nodes = str(nodes)
    if not isinstance(nodes, str) or not _NODES.fullmatch(nodes):
        raise BudgetError(f"{path}.nodes: must be a count or a percentage 0-100%, got {nodes!r}")
    schedule_text, duration_text = item.get("schedule"), item.get("duration")
    if (schedule_text is None) != (duration_text is None):
        raise BudgetError(f"{path}: 'schedule' must be set with 'duration'")
    schedule = duration = None
    if schedule_text is not None:
        schedule = read_schedule(schedule_text, f"{path}.schedule")
        duration = _duration(duration_text, f"{path}.duration")
    reasons = _reasons(item.get("reasons"), f"{path}.reasons")
    if not nodes.endswith("%") and int(nodes) >= _INT64:
        raise _CountTooLarge(
            f"{path}.nodes: {nodes} is past int64, which Karpenter cannot read as a count; "
            f"{_FAILS_CLOSED} (while the budget is active)",
            schedule,
            duration,
        )
    return Budget(nodes, schedule, duration, reasons)


def read_schedule(value: object, path: str = "schedule") -> CronSchedule:
    """A budget's ``schedule`` as the CRD admits it and Karpenter reads it; a
    :class:`BudgetError` naming ``path`` otherwise (saying when Karpenter would fail closed)."""
    if not isinstance(value, str):
        raise BudgetError(f"{path}: must be a string")
    if not _SCHEDULE.search(value):
        raise BudgetError(
            f"{path}: must be a descriptor such as @daily or five cron fields, got {value!r}"
        )
    try:
        return parse_cron(value, path)
    except CronError as error:
        raise BudgetError(f"{error}; {_FAILS_CLOSED}") from None


def _duration(value: object, path: str) -> timedelta:
    match = _DURATION.fullmatch(value) if isinstance(value, str) else None
    if match is None or not (match.group(1) or match.group(2)):
        raise BudgetError(
            f"{path}: must be hours and/or minutes such as 8h or 1h30m, got {value!r}"
        )
    minutes = 60 * int(match.group(1) or 0) + int(match.group(2) or 0)
    if minutes * 60_000_000_000 >= _INT64:  # Go's time.ParseDuration refuses it
        raise BudgetError(f"{path}: {value!r} is past Go's limit of 2^63-1 ns; {_FAILS_CLOSED}")
    return timedelta(minutes=minutes)


def _reasons(value: object, path: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise BudgetError(f"{path}: must be a list")
    for reason in value:
        if reason not in REASONS:
            raise BudgetError(f"{path}: {reason!r} is not one of {', '.join(REASONS)}")
    return tuple(value)
