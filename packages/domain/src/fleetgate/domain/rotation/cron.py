"""Cron schedules as Karpenter reads a disruption budget's ``schedule`` (always in UTC).

Karpenter parses ``schedule`` with robfig/cron's standard parser (five fields, ``TZ=UTC``). What
this matcher accepts is exactly the subset that parser gives a meaning to:

- five fields: minute (0-59), hour (0-23), day of month (1-31), month (1-12 or JAN-DEC), day of
  week (0-6 or SUN-SAT; names in any case);
- per field a comma-separated list of ``*`` (or ``?``), ``N``, ``N-M``, each optionally with a
  step ``/S``; ``N/S`` means ``N-max/S``;
- the macros ``@yearly`` (``@annually``), ``@monthly``, ``@weekly``, ``@daily`` (``@midnight``)
  and ``@hourly``, the only ones Karpenter's CRD admits.

Day of month and day of week combine as cron's do: when either field starts with ``*`` or ``?``
(without a step) a day must match both, otherwise it must match either. Anything else
(``@every``, ``L``, ``W``, ``#``, a 7 for Sunday, a ``TZ=`` prefix, six fields) is refused with
the field named.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

__all__ = ["CronError", "CronSchedule", "parse_cron"]

_MACROS = {
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
_SEARCH_DAYS = 366 * 5  # as robfig/cron: a schedule that never hits in five years never hits
_MINUTE = timedelta(minutes=1)


class CronError(ValueError):
    """A schedule this matcher (and Karpenter) cannot read; the message names the field."""


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
        """The first firing strictly after ``instant`` (None: none within five years)."""
        at = instant.astimezone(UTC)
        start = at.replace(second=0, microsecond=0) + _MINUTE
        day = start.replace(hour=0, minute=0)
        hours, minutes = sorted(self.hours), sorted(self.minutes)
        for offset in range(_SEARCH_DAYS):
            current = day + timedelta(days=offset)
            if not self.day_matches(current):
                continue
            for hour in hours:
                for minute in minutes:
                    hit = current.replace(hour=hour, minute=minute)
                    if hit >= start:
                        return hit
        return None

    def last_at_or_before(self, instant: datetime) -> datetime | None:
        """The last firing at or before ``instant`` (None: none within five years before)."""
        at = instant.astimezone(UTC)
        end = at.replace(second=0, microsecond=0)
        day = end.replace(hour=0, minute=0)
        hours, minutes = sorted(self.hours, reverse=True), sorted(self.minutes, reverse=True)
        for offset in range(_SEARCH_DAYS):
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
    """Parse ``text`` (see the module docstring); errors name ``path`` and the field."""
    source = text.strip()
    if source.startswith("@"):
        expanded = _MACROS.get(source.lower())
        if expanded is None:
            raise CronError(
                f"{path}: unsupported macro {source!r} (use one of {', '.join(sorted(_MACROS))})"
            )
        source = expanded
    parts = source.split()
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


def _parse_field(
    text: str, low: int, high: int, names: tuple[str, ...], where: str
) -> tuple[frozenset[int], bool]:
    """One field's values, and whether it starts with an unstepped ``*``/``?``."""
    values: set[int] = set()
    star = False
    for item in text.split(","):
        if not item:
            raise CronError(f"{where}: empty list item in {text!r}")
        span, _, step_text = item.partition("/")
        step = 1
        if "/" in item:
            if not step_text.isdigit() or int(step_text) == 0:
                raise CronError(f"{where}: step must be a positive number, got {item!r}")
            step = int(step_text)
        if span in ("*", "?"):
            first, last = low, high
            star = star or step == 1
        else:
            first_text, dash, last_text = span.partition("-")
            first = _value(first_text, low, names, where)
            if dash:
                last = _value(last_text, low, names, where)
            elif "/" in item:
                last = high  # "N/S" runs to the field's end
            else:
                last = first
            if first < low or last > high:
                raise CronError(f"{where}: {item!r} is outside {low}-{high}")
            if first > last:
                raise CronError(f"{where}: {item!r} runs backwards")
        values.update(range(first, last + 1, step))
    return frozenset(values), star


def _value(text: str, low: int, names: tuple[str, ...], where: str) -> int:
    if text.isdigit():
        return int(text)
    lowered = text.lower()
    if lowered in names:
        return names.index(lowered) + low
    raise CronError(f"{where}: {text!r} is not a number or a name")
