"""Cron schedules as Karpenter reads a disruption budget's ``schedule`` (always in UTC).

Karpenter hands ``"TZ=UTC " + schedule`` to robfig/cron v3's ``ParseStandard``
(kubernetes-sigs/karpenter ``pkg/apis/v1/nodepool.go``, ``Budget.IsActive``). This module reads a
schedule as that parser does (robfig/cron ``parser.go``), text for text:

- surrounding whitespace is dropped (Go's ``strings.TrimSpace`` after the ``TZ=`` prefix);
- a text starting with ``@`` is a descriptor, named exactly (lower case): ``@yearly``
  (``@annually``), ``@monthly``, ``@weekly``, ``@daily`` (``@midnight``), ``@hourly``. ``@every``
  is a different kind of schedule that Karpenter's CRD never admits: it is refused;
- otherwise exactly five fields split on Go's whitespace: minute (0-59), hour (0-23), day of
  month (1-31), month (1-12 or JAN-DEC), day of week (0-6 or SUN-SAT; names in any case);
- a field is a comma-separated list (empty items are skipped, as Go's ``strings.FieldsFunc``
  skips them) of ``*`` or ``?`` (anything after a ``-`` that follows them is ignored: ``*-5`` is
  ``*``), ``N`` or ``N-M``, each optionally with a step ``/S``; ``N/S`` means ``N-max/S``;
- a number is what Go's ``strconv.Atoi`` reads: an optional ``+`` or ``-`` and ASCII digits only
  (``+5`` is 5; a superscript or an Arabic-Indic digit is no number); a negative one is refused.

Day of month and day of week combine as robfig's do: when either field holds an unstepped ``*``
or ``?`` a day must match both, otherwise it must match either. Anything else (``L``, ``W``,
``#``, a 7 for Sunday, six fields) is refused with the field named.

A schedule that never fires ("0 0 30 2 *") reads: robfig's ``Next`` then returns the zero time,
and Karpenter takes that as "the budget is active" (:attr:`CronSchedule.fires`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

__all__ = ["GO_SPACE", "CronError", "CronSchedule", "parse_cron"]

_DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# (name, low, high, names offset by low)
_FIELDS = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 6, _DAYS),
)
#: Go's ``unicode.IsSpace``: what ``strings.TrimSpace`` and ``strings.Fields`` cut on. Python's
#: own whitespace differs (it counts U+001C-U+001F, Go does not).
GO_SPACE = frozenset(
    "\t\n\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000"
    + "".join(chr(c) for c in range(0x2000, 0x200B))
)
_DIGITS = frozenset("0123456789")
_INT64 = 1 << 63
_HORIZON_YEARS = 5  # robfig's Next: no hit by the end of the fifth year after -> the zero time
_MINUTE = timedelta(minutes=1)
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # February in a leap year


class CronError(ValueError):
    """A schedule robfig/cron (so Karpenter) cannot read; the message names the field."""


@dataclass(frozen=True)
class CronSchedule:
    """A parsed five-field schedule, matched in UTC at whole minutes."""

    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    """0 = Sunday, as cron counts."""
    either_day: bool
    """Both day fields are restricted: a day matching either one matches."""
    fires: bool = field(init=False)
    """Whether any date can match: "0 0 30 2 *" never fires (robfig's ``Next`` gives the zero
    time, which Karpenter reads as an active budget)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "fires", self._can_fire())

    def _can_fire(self) -> bool:
        if not (self.minutes and self.hours and self.months):
            return False
        on_a_date = any(day <= _MONTH_DAYS[month - 1] for month in self.months for day in self.days)
        if self.either_day:
            return bool(self.weekdays) or on_a_date
        return bool(self.weekdays) and on_a_date  # every month has every weekday

    def day_matches(self, day: datetime) -> bool:
        """Whether the calendar day of ``day`` (UTC) is one the schedule fires on."""
        if day.month not in self.months:
            return False
        in_month = day.day in self.days
        in_week = (day.isoweekday() % 7) in self.weekdays
        return (in_month or in_week) if self.either_day else (in_month and in_week)

    def matches(self, instant: datetime) -> bool:
        """Whether the schedule fires at the minute of ``instant`` (UTC)."""
        at = instant.astimezone(UTC)
        return at.minute in self.minutes and at.hour in self.hours and self.day_matches(at)

    def next_after(self, instant: datetime) -> datetime | None:
        """The first firing strictly after ``instant``; None where robfig's ``Next`` gives the
        zero time (no firing by the end of the fifth year after ``instant``'s)."""
        if not self.fires:
            return None
        at = instant.astimezone(UTC)
        start = at.replace(second=0, microsecond=0) + _MINUTE
        current = start.replace(hour=0, minute=0)
        hours, minutes = sorted(self.hours), sorted(self.minutes)
        while current.year <= start.year + _HORIZON_YEARS:
            if self.day_matches(current):
                for hour in hours:
                    for minute in minutes:
                        hit = current.replace(hour=hour, minute=minute)
                        if hit >= start:
                            return hit
            current += timedelta(days=1)
        return None

    def last_at_or_before(self, instant: datetime) -> datetime | None:
        """The last firing at or before ``instant`` (None: none within five years before)."""
        if not self.fires:
            return None
        at = instant.astimezone(UTC)
        end = at.replace(second=0, microsecond=0)
        day = end.replace(hour=0, minute=0)
        hours, minutes = sorted(self.hours, reverse=True), sorted(self.minutes, reverse=True)
        for offset in range(366 * _HORIZON_YEARS):
            current = day - timedelta(days=offset)
            if not self.day_matches(current):
                continue
            for hour in hours:
                for minute in minutes:
                    hit = current.replace(hour=hour, minute=minute)
                    if hit <= end:
                        return hit
        return None


def parse_cron(text: str, path: str = "schedule") -> CronSchedule:
    """Parse ``text`` as Karpenter does (see the module docstring); errors name ``path`` and the
    field."""
    source = _trim(text)
    if source.startswith("@"):
        expanded = _DESCRIPTORS.get(source)
        if expanded is None:
            raise CronError(
                f"{path}: unsupported descriptor {source!r} (use one of "
                f"{', '.join(sorted(_DESCRIPTORS))}, in lower case)"
            )
        source = expanded
    parts = _fields(source)
    if len(parts) != len(_FIELDS):
        raise CronError(
            f"{path}: expected 5 fields (minute hour day-of-month month day-of-week), "
            f"got {len(parts)} in {text!r}"
        )
    values: list[frozenset[int]] = []
    starred: list[bool] = []
    for part, (name, low, high, names) in zip(parts, _FIELDS, strict=True):
        field_values, star = _parse_field(part, low, high, names, f"{path} ({name})")
        values.append(field_values)
        starred.append(star)
    minutes, hours, days, months, weekdays = values
    return CronSchedule(
        text=text,
        minutes=minutes,
        hours=hours,
        days=days,
        months=months,
        weekdays=weekdays,
        either_day=not (starred[2] or starred[4]),
    )


def _trim(text: str) -> str:
    """Go's ``strings.TrimSpace``."""
    start, end = 0, len(text)
    while start < end and text[start] in GO_SPACE:
        start += 1
    while end > start and text[end - 1] in GO_SPACE:
        end -= 1
    return text[start:end]


def _fields(text: str) -> list[str]:
    """Go's ``strings.Fields``: the runs between Go's whitespace."""
    out: list[str] = []
    current: list[str] = []
    for char in text:
        if char in GO_SPACE:
            if current:
                out.append("".join(current))
                current = []
        else:
            current.append(char)
    if current:
        out.append("".join(current))
    return out


def _parse_field(
    text: str, low: int, high: int, names: tuple[str, ...], where: str
) -> tuple[frozenset[int], bool]:
    """One field's values, and whether it holds an unstepped ``*``/``?`` (robfig's star bit)."""
    values: set[int] = set()
    star = False
    for item in (piece for piece in text.split(",") if piece):
        span_and_step = item.split("/")
        if len(span_and_step) > 2:
            raise CronError(f"{where}: too many slashes in {item!r}")
        bounds = span_and_step[0].split("-")
        starred = bounds[0] in ("*", "?")
        if starred:
            first, last = low, high
        else:
            if len(bounds) > 2:
                raise CronError(f"{where}: too many hyphens in {item!r}")
            first = _number_or_name(bounds[0], names, low, where)
            last = first if len(bounds) == 1 else _number_or_name(bounds[1], names, low, where)
        step = 1
        if len(span_and_step) == 2:
            step = _number(span_and_step[1], where)
            if len(bounds) == 1:
                last = high  # "N/S" runs to the field's end
        if first < low or last > high:
            raise CronError(f"{where}: {item!r} is outside {low}-{high}")
        if first > last:
            raise CronError(f"{where}: {item!r} runs backwards")
        if step == 0:
            raise CronError(f"{where}: step must be a positive number, got {item!r}")
        values.update(range(first, last + 1, step))
        star = star or (starred and step <= 1)
    return frozenset(values), star


def _number_or_name(text: str, names: tuple[str, ...], low: int, where: str) -> int:
    lowered = text.lower()
    if lowered in names:
        return names.index(lowered) + low
    return _number(text, where)


def _number(text: str, where: str) -> int:
    """Go's ``strconv.Atoi`` (a sign, then ASCII digits, within int64), refused when negative."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or any(char not in _DIGITS for char in digits):
        raise CronError(f"{where}: {text!r} is not a number or a name")
    value = int(digits)
    if value >= _INT64 + (text[:1] == "-"):
        raise CronError(f"{where}: {text!r} is out of range")
    if text[:1] == "-" and value:
        raise CronError(f"{where}: {text!r} is negative")
    return value
