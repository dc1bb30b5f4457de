"""Maintenance windows (spec §3): membership, canonical weekly occurrences, P, D and gap.

Two views of the same schedule, on purpose:

* **Membership** (:meth:`Schedule.in_window`) reads the true local wall clock of each entry's
  zone, so a start inside a spring-forward hole never matches and a repeated fall-back hour
  matches twice. This is what the start gate uses.
* **Shape** (:meth:`Schedule.shape`: P, D, gap) places every entry on one *canonical* week using
  the zone's UTC offset in the anchor week of Monday 2024-01-01 (northern winter). DST can shift a
  real occurrence by an hour against this; the derivation accepts that approximation (spec §3).

Beyond the reference: an entry whose ``end`` is not after its ``start`` wraps past midnight into the
next day (one occurrence, no 1-minute seam), ``end: "24:00"`` closes at midnight, and dated
``exclusions`` close the schedule during ``[start, end)``. Exclusions are one-off, so they take no
part in the weekly shape; they only affect :meth:`Schedule.is_open` and the interval views.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from fleetgate.domain.rotation.wallclock import instants_of_wall_time

__all__ = [
    "ANCHOR",
    "CONTINUOUS_WINDOW_PERIOD",
    "DAY_NAMES",
    "END_PATTERN",
    "START_PATTERN",
    "WEEK",
    "Exclusion",
    "Interval",
    "MaintenanceWindow",
    "Occurrence",
    "Schedule",
    "WindowError",
    "WindowRule",
    "WindowShape",
    "exclusion_errors",
    "load_zone",
    "parse_clock",
    "parse_day",
    "window_errors",
]

WEEK = timedelta(days=7)
ANCHOR = datetime(2024, 1, 1, tzinfo=UTC)
"""Monday 2024-01-01 00:00 UTC: the canonical week every occurrence is placed on."""
CONTINUOUS_WINDOW_PERIOD = timedelta(minutes=1)
"""P of a schedule that is open all week (reference issue #62): the controller's decision grid."""
DAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MINUTES_PER_DAY = 24 * 60
#: A window's ``start`` ("HH:MM", 00:00-23:59) and ``end`` (also "24:00"): the patterns the
#: policy schema states (``rotation.schema``). Matched whole here, as Go anchors them ("01:00\n"
#: is no time: Python's "$" would let the newline through).
START_PATTERN = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"
END_PATTERN = r"^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$"
_START = re.compile(START_PATTERN)


class WindowError(ValueError):
    """A maintenance window or exclusion that cannot be compiled; ``errors`` lists every problem."""

    def __init__(self, errors: Sequence[str]) -> None:
        self.errors = tuple(errors)
        super().__init__("; ".join(self.errors))


@dataclass(frozen=True)
class MaintenanceWindow:
    """One ``maintenanceWindows[]`` entry exactly as written in the manifest."""

    timezone: str
    days: tuple[str, ...]
    start: str
    end: str


@dataclass(frozen=True)
class Exclusion:
    """A dated range ``[start, end)`` during which no rotation starts."""

    start: datetime
    end: datetime

    def contains(self, instant: datetime) -> bool:
        """Whether ``instant`` falls inside the range (start inclusive, end exclusive)."""
        return self.start <= instant < self.end


@dataclass(frozen=True)
class Interval:
    """A concrete span ``[start, end)`` of UTC instants."""

    start: datetime
    end: datetime

    @property
    def length(self) -> timedelta:
        """How long the span lasts."""
        return self.end - self.start


@dataclass(frozen=True)
class Occurrence:
    """One merged window occurrence on the canonical week: offsets from :data:`ANCHOR`."""

    start: timedelta
    length: timedelta

    @property
    def end(self) -> timedelta:
        """Offset of the occurrence's end (may pass the end of the week after fusing)."""
        return self.start + self.length


@dataclass(frozen=True)
class WindowShape:
    """What the derivation needs from a schedule: P, D and gap (spec §3)."""

    period: timedelta
    """P: the worst-case time from one occurrence start to the next; 0 when there are none."""
    shortest: timedelta
    """D: the shortest occurrence; 0 when there are none."""
    gap: timedelta | None
    """The shortest closed stretch between occurrences; None when none or always open."""


def parse_day(text: str) -> int | None:
    """Day name ("Mon".."Sun", case-insensitive, trimmed) to 0..6, or None."""
    folded = text.strip().casefold()
    for index, name in enumerate(DAY_NAMES):
        if folded == name.casefold():
            return index
    return None


def parse_clock(text: str, *, allow_midnight_end: bool = False) -> int | None:
    """ "HH:MM" (00:00..23:59, or "24:00" when allowed) to minutes after midnight, or None."""
    if allow_midnight_end and text == "24:00":
        return _MINUTES_PER_DAY
    if not _START.fullmatch(text):
        return None
    return int(text[:2]) * 60 + int(text[3:])


def load_zone(name: str) -> ZoneInfo | None:
    """The IANA time zone called ``name``, or None when it does not load."""
    if not name or name != name.strip():
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


def window_errors(window: MaintenanceWindow, path: str) -> list[str]:
    """Every problem with one window entry, each prefixed with its field path."""
    errors: list[str] = []
    if load_zone(window.timezone) is None:
        errors.append(f"{path}.timezone: unknown time zone {window.timezone!r}")
    if not window.days:
        errors.append(f"{path}.days: must name at least one day")
    first_index: dict[int, int] = {}
    for index, day in enumerate(window.days):
        number = parse_day(day)
        if number is None:
            errors.append(
                f"{path}.days[{index}]: unknown day {day!r} (expected one of "
                f"{', '.join(DAY_NAMES)})"
            )
        elif number in first_index:
            errors.append(
                f"{path}.days[{index}]: {day!r} repeats {DAY_NAMES[number]} "
                f"(already days[{first_index[number]}]); name each day once"
            )
        else:
            first_index[number] = index
    start = parse_clock(window.start)
    end = parse_clock(window.end, allow_midnight_end=True)
    if start is None:
        errors.append(
            f"{path}.start: must be a time HH:MM between 00:00 and 23:59, got {window.start!r}"
        )
    if end is None:
        errors.append(
            f"{path}.end: must be a time HH:MM between 00:00 and 24:00, got {window.end!r}"
        )
    if start is not None and end is not None and start == end:
        errors.append(
            f"{path}.end: must differ from start ({window.start}); use 00:00-24:00 for a whole day"
        )
    return errors


def exclusion_errors(exclusion: Exclusion, path: str) -> list[str]:
    """Every problem with one exclusion, each prefixed with its field path."""
    errors: list[str] = []
    for name, value in (("start", exclusion.start), ("end", exclusion.end)):
        if value.tzinfo is None:
            errors.append(f"{path}.{name}: must carry a UTC offset (RFC3339), e.g. ...Z")
    if not errors and exclusion.end <= exclusion.start:
        errors.append(f"{path}.end: must be after start")
    return errors


@dataclass(frozen=True)
class WindowRule:
    """A compiled window entry: minutes after local midnight, ``end <= start`` wrapping."""

    zone: ZoneInfo
    days: frozenset[int]
    start: int
    end: int

    @classmethod
    def compile(cls, window: MaintenanceWindow, path: str = "window") -> WindowRule:
        """Compile a manifest entry; raises :class:`WindowError` naming every bad field."""
        errors = window_errors(window, path)
        if errors:
            raise WindowError(errors)
        zone = load_zone(window.timezone)
        start = parse_clock(window.start)
        end = parse_clock(window.end, allow_midnight_end=True)
        days = frozenset(day for day in map(parse_day, window.days) if day is not None)
        assert zone is not None and start is not None and end is not None  # checked above
        return cls(zone=zone, days=days, start=start, end=end)

    @property
    def wraps(self) -> bool:
        """Whether the window runs past local midnight into the next day."""
        return self.end <= self.start

    @property
    def length(self) -> timedelta:
        """Wall-clock length of one occurrence."""
        minutes = self.end - self.start
        return timedelta(minutes=minutes + _MINUTES_PER_DAY if minutes <= 0 else minutes)

    def contains(self, instant: datetime) -> bool:
        """Membership at ``instant`` on the true local wall clock (seconds ignored)."""
        local = instant.astimezone(self.zone)
        minutes = local.hour * 60 + local.minute
        weekday = local.weekday()
        if not self.wraps:
            return weekday in self.days and self.start <= minutes < self.end
        started_today = weekday in self.days and minutes >= self.start
        carried_from_yesterday = (weekday - 1) % 7 in self.days and minutes < self.end
        return started_today or carried_from_yesterday

    def spans(self) -> list[tuple[timedelta, timedelta]]:
        """This entry's occurrences on the canonical week, split at the week's end."""
        spans: list[tuple[timedelta, timedelta]] = []
        for day in sorted(self.days):
            local = datetime.combine(
                ANCHOR.date() + timedelta(days=day),
                time(self.start // 60, self.start % 60),
                tzinfo=self.zone,
            )
            offset = (local - ANCHOR) % WEEK
            end = offset + self.length
            if end > WEEK:
                spans.extend([(timedelta(0), end - WEEK), (offset, WEEK)])
            else:
                spans.append((offset, end))
        return spans

    def boundary_walls(self, first: date, last: date) -> Iterable[datetime]:
        """Local (naive) wall times where this entry opens or closes, for days first..last."""
        day = first
        while day <= last:
            if day.weekday() in self.days:
                yield datetime.combine(day, time(self.start // 60, self.start % 60))
                close_day = day + timedelta(days=1) if self.wraps or self.end == 1440 else day
                minutes = self.end % _MINUTES_PER_DAY
                yield datetime.combine(close_day, time(minutes // 60, minutes % 60))
            day += timedelta(days=1)


_SPANS_KEPT = 4


@dataclass(frozen=True)
class Schedule:
    """The union of a policy's window entries plus its exclusions."""

    rules: tuple[WindowRule, ...] = ()
    exclusions: tuple[Exclusion, ...] = ()
    _spans: dict[bool, list[tuple[datetime, bool, datetime | None]]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """Per ``exclusions`` flag, the last few spans of constant openness asked about: from an
    instant, the openness there and the next transition. Every pass asks about the same one or
    two spans (the current and the next: windows change a few times a day), and walking a week
    of window edges per question is most of a pass's cost otherwise."""

    @classmethod
    def compile(
        cls,
        windows: Sequence[MaintenanceWindow],
        exclusions: Sequence[Exclusion] = (),
        path: str = "spec",
    ) -> Schedule:
        """Compile manifest entries; raises :class:`WindowError` listing every bad field."""
        errors: list[str] = []
        for index, window in enumerate(windows):
            errors += window_errors(window, f"{path}.maintenanceWindows[{index}]")
        for index, exclusion in enumerate(exclusions):
            errors += exclusion_errors(exclusion, f"{path}.exclusions[{index}]")
        if errors:
            raise WindowError(errors)
        return cls(
            rules=tuple(WindowRule.compile(window) for window in windows),
            exclusions=tuple(sorted(exclusions, key=lambda e: (e.start, e.end))),
        )

    # --- membership -------------------------------------------------------------------------

    def in_window(self, now: datetime) -> bool:
        """Whether some window entry is open at ``now`` (exclusions not considered)."""
        _require_aware(now)
        return self._span(now, False)[1]

    def _in_window(self, now: datetime) -> bool:
        # Asked of the rules themselves (``in_window`` answers from the remembered spans).
        return any(rule.contains(now) for rule in self.rules)

    def exclusion_at(self, now: datetime) -> Exclusion | None:
        """The exclusion covering ``now`` (the one ending last when several overlap), if any."""
        _require_aware(now)
        covering = [e for e in self.exclusions if e.contains(now)]
        return max(covering, key=lambda e: e.end) if covering else None

    def is_open(self, now: datetime) -> bool:
        """Whether a rotation may start at ``now``: in a window and not in an exclusion."""
        _require_aware(now)
        return self._span(now, True)[1]

    def _is_open(self, now: datetime) -> bool:
        return self._in_window(now) and self.exclusion_at(now) is None

    # --- canonical shape --------------------------------------------------------------------

    def occurrences(self) -> tuple[Occurrence, ...]:
        """Merged canonical occurrences on the anchor week, sorted by start (spec §3 steps 1-3)."""
        spans = sorted(span for rule in self.rules for span in rule.spans())
        merged: list[list[timedelta]] = []
        for start, end in spans:
            if merged and start <= merged[-1][1]:  # overlap or adjacency merges
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        if len(merged) > 1 and merged[0][0] == timedelta(0) and merged[-1][1] == WEEK:
            first, last = merged.pop(0), merged.pop()
            # The week's seam is not a real gap: one occurrence from the last start on.
            merged.append([last[0], WEEK + first[1]])
        return tuple(Occurrence(start=s, length=e - s) for s, e in merged)

    def shape(self) -> WindowShape:
        """P, D and gap of the canonical occurrences."""
        occurrences = self.occurrences()
        if not occurrences:
            return WindowShape(period=timedelta(0), shortest=timedelta(0), gap=None)
        shortest = min(o.length for o in occurrences)
        if any(o.length >= WEEK for o in occurrences):
            return WindowShape(period=CONTINUOUS_WINDOW_PERIOD, shortest=shortest, gap=None)
        starts = [o.start for o in occurrences]
        period = max([b - a for a, b in pairwise(starts)] + [starts[0] + WEEK - starts[-1]])
        following = [o.start for o in occurrences[1:]] + [occurrences[0].start + WEEK]
        gap = min(nxt - o.end for o, nxt in zip(occurrences, following, strict=True))
        return WindowShape(period=period, shortest=shortest, gap=gap)

    # --- concrete instants (simulator, controller requeue) ----------------------------------

    def window_intervals(self, start: datetime, end: datetime) -> list[Interval]:
        """The spans of ``[start, end)`` during which some window is open, clipped to it."""
        _require_aware(start)
        _require_aware(end)
        if end <= start or not self.rules:
            return []
        points = {start}
        for rule in self.rules:
            first = start.astimezone(rule.zone).date() - timedelta(days=1)
            last = end.astimezone(rule.zone).date() + timedelta(days=1)
            for wall in rule.boundary_walls(first, last):
                points.update(p for p in instants_of_wall_time(wall, rule.zone) if start < p < end)
        return _runs(sorted(points), end, self._in_window)

    def open_intervals(self, start: datetime, end: datetime) -> list[Interval]:
        """The spans of ``[start, end)`` in which a rotation may start (windows − exclusions)."""
        intervals = self.window_intervals(start, end)
        for exclusion in self.exclusions:
            intervals = _subtract(intervals, exclusion)
        return intervals

    def next_transition(self, after: datetime, *, exclusions: bool = True) -> datetime | None:
        """The first instant after ``after`` at which openness changes; None if it never does.

        With ``exclusions=False`` only the windows count (``window-open``/``window-close``).
        """
        _require_aware(after)
        return self._span(after, exclusions)[2]

    def _span(self, at: datetime, exclusions: bool) -> tuple[datetime, bool, datetime | None]:
        """The span of constant openness holding ``at``: (from, openness, next transition)."""
        spans = self._spans.setdefault(exclusions, [])
        for span in spans:
            if span[0] <= at and (span[2] is None or at < span[2]):
                # Openness is constant from span[0] up to its next transition, so every
                # instant in between has the same openness and the same next transition.
                return span
        state = self._is_open if exclusions else self._in_window
        found = (at, state(at), self._next_transition(at, exclusions))
        spans.insert(0, found)
        del spans[_SPANS_KEPT:]
        return found

    def _next_transition(self, after: datetime, exclusions: bool) -> datetime | None:
        state = self._is_open if exclusions else self._in_window
        before = state(after)
        cursor = after
        boundaries = sorted({t for e in self.exclusions for t in (e.start, e.end)})
        while True:
            candidates: list[datetime] = []
            covering = self.exclusion_at(cursor) if exclusions else None
            if covering is not None:
                # Closed for the whole exclusion: nothing can change before it ends.
                candidates.append(covering.end)
            else:
                window_change = self._next_window_change(cursor)
                if window_change is not None:
                    candidates.append(window_change)
                if exclusions:
                    candidates += [t for t in boundaries if t > cursor][:1]
            if not candidates:
                return None
            cursor = min(candidates)
            if state(cursor) != before:
                return cursor

    def _next_window_change(self, after: datetime) -> datetime | None:
        """First instant after ``after`` where window membership flips (windows repeat weekly)."""
        horizon = after + WEEK + timedelta(days=1)
        intervals = self.window_intervals(after, horizon)
        if not intervals:
            return None  # no window in more than a week: never open
        first = intervals[0]
        if first.start > after:
            return first.start
        # Open at ``after``; open through the whole horizon means open all the time.
        return first.end if first.end < horizon else None


def _require_aware(instant: datetime) -> None:
    """Reject naive datetimes: window arithmetic on them would silently use local time."""
    if instant.tzinfo is None:
        raise ValueError("instants passed to a Schedule must be timezone-aware")


def _runs(
    points: list[datetime], end: datetime, member: Callable[[datetime], bool]
) -> list[Interval]:
    """Turn sorted change points into merged intervals where ``member`` holds (until ``end``)."""
    intervals: list[Interval] = []
    open_since: datetime | None = None
    for point in points:
        inside = member(point)
        if inside and open_since is None:
            open_since = point
        elif not inside and open_since is not None:
            intervals.append(Interval(open_since, point))
            open_since = None
    if open_since is not None:
        intervals.append(Interval(open_since, end))
    return intervals


def _subtract(intervals: list[Interval], hole: Exclusion) -> list[Interval]:
    """Remove ``[hole.start, hole.end)`` from every interval."""
    result: list[Interval] = []
    for interval in intervals:
        if hole.end <= interval.start or hole.start >= interval.end:
            result.append(interval)
            continue
        if interval.start < hole.start:
            result.append(Interval(interval.start, hole.start))
        if hole.end < interval.end:
            result.append(Interval(hole.end, interval.end))
    return result
