"""Maintenance windows (spec §3): the pinned shapes, membership with DST, wrap, exclusions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetgate.domain.rotation.windows import (
    ANCHOR,
    DAY_NAMES,
    WEEK,
    Exclusion,
    Interval,
    MaintenanceWindow,
    Schedule,
    WindowError,
    WindowRule,
    parse_clock,
    parse_day,
)
from tests.strategies import instants, window_lists

H = timedelta(hours=1)
M = timedelta(minutes=1)
JST = ZoneInfo("Asia/Tokyo")
NY = ZoneInfo("America/New_York")


def schedule(*entries: tuple[str, tuple[str, ...], str, str], exclusions=()) -> Schedule:
    """A schedule from (zone, days, start, end) tuples."""
    return Schedule.compile([MaintenanceWindow(*entry) for entry in entries], exclusions)


def shape(*entries: tuple[str, tuple[str, ...], str, str]) -> tuple:
    """(P, D, gap) of the entries."""
    s = schedule(*entries).shape()
    return s.period, s.shortest, s.gap


WED_SAT_TOKYO = ("Asia/Tokyo", ("Wed", "Sat"), "02:00", "06:00")


# --- the pinned shapes of window_test.go ------------------------------------------------------


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        ([WED_SAT_TOKYO], (96 * H, 4 * H, 68 * H)),
        ([("Asia/Tokyo", ("Sat",), "02:00", "06:00")], (168 * H, 4 * H, 164 * H)),
        ([("UTC", ("Mon", "Wed", "Fri"), "00:00", "01:00")], (72 * H, 1 * H, 47 * H)),
        (
            [("UTC", ("Wed",), "02:00", "06:00"), ("Asia/Tokyo", ("Wed",), "02:00", "06:00")],
            (159 * H, 4 * H, 5 * H),
        ),
        (
            [("UTC", ("Mon",), "00:00", "02:00"), ("UTC", ("Mon",), "02:00", "06:00")],
            (168 * H, 6 * H, 162 * H),
        ),
        ([("Asia/Tokyo", ("Mon",), "06:00", "10:00")], (168 * H, 4 * H, 164 * H)),
        (
            [("Asia/Tokyo", ("Sat", "Sun"), "02:00", "03:30")],
            (144 * H, 90 * M, 22 * H + 30 * M),
        ),
        ([("UTC", DAY_NAMES, "00:00", "23:59")], (24 * H, 23 * H + 59 * M, 1 * M)),
        (
            [
                ("Asia/Tokyo", ("Mon",), "06:00", "10:00"),
                ("UTC", ("Wed",), "02:00", "06:00"),
                ("UTC", ("Fri",), "02:00", "06:00"),
            ],
            (67 * H, 4 * H, 44 * H),
        ),
    ],
)
def test_pinned_shapes(entries: list, expected: tuple) -> None:
    assert shape(*entries) == expected


def test_overlapping_entries_merge() -> None:
    _, shortest, _ = shape(("UTC", ("Wed",), "01:00", "04:00"), ("UTC", ("Wed",), "03:00", "06:00"))
    assert shortest == 5 * H


def test_occurrence_offsets_use_the_anchor_week_offset() -> None:
    utc = schedule(("UTC", ("Wed",), "02:00", "06:00")).occurrences()
    tokyo = schedule(("Asia/Tokyo", ("Wed",), "02:00", "06:00")).occurrences()
    new_york = schedule(("America/New_York", ("Wed",), "02:00", "03:00")).occurrences()
    assert [o.start for o in utc] == [50 * H]
    assert [o.start for o in tokyo] == [41 * H]
    assert [o.start for o in new_york] == [55 * H]  # EST in the anchor week


def test_occurrence_wrapping_the_week_is_fused() -> None:
    # JST Mon 06:00 is Sun 21:00 UTC: split at the week's end, then fused back into one.
    (occurrence,) = schedule(("Asia/Tokyo", ("Mon",), "06:00", "10:00")).occurrences()
    assert (occurrence.start, occurrence.length) == (165 * H, 4 * H)


def test_full_week_is_continuous() -> None:
    assert shape(("UTC", DAY_NAMES, "00:00", "24:00")) == (M, 7 * 24 * H, None)
    # The reference's only way to a full week: entries that cover each other's seams.
    assert shape(("UTC", DAY_NAMES, "00:00", "23:59"), ("UTC", DAY_NAMES, "23:00", "01:00")) == (
        M,
        7 * 24 * H,
        None,
    )


def test_empty_schedule_is_undefined_and_never_open() -> None:
    empty = Schedule()
    assert shape() == (timedelta(0), timedelta(0), None)
    assert not empty.in_window(datetime(2024, 1, 3, 3, tzinfo=UTC))
    assert empty.window_intervals(ANCHOR, ANCHOR + WEEK) == []
    assert empty.next_transition(ANCHOR) is None


# --- membership -------------------------------------------------------------------------------


def test_membership_boundaries_start_inclusive_end_exclusive() -> None:
    s = schedule(WED_SAT_TOKYO)
    wednesday = datetime(2024, 1, 3, tzinfo=JST)
    assert s.in_window(wednesday.replace(hour=2))
    assert s.in_window(wednesday.replace(hour=5, minute=59, second=59))
    assert not s.in_window(wednesday.replace(hour=6))
    assert not s.in_window(wednesday.replace(hour=1, minute=59, second=59))
    assert not s.in_window(datetime(2024, 1, 4, 3, tzinfo=JST))  # Thursday


def test_membership_reads_the_zone_not_utc() -> None:
    s = schedule(WED_SAT_TOKYO)
    # Wed 02:00 JST is Tue 17:00 UTC.
    assert s.in_window(datetime(2024, 1, 2, 17, tzinfo=UTC))
    assert not s.in_window(datetime(2024, 1, 3, 2, tzinfo=UTC))


def test_membership_rejects_naive_instants() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        schedule(WED_SAT_TOKYO).in_window(datetime(2024, 1, 3, 3))


def test_dst_spring_forward_hole_never_matches() -> None:
    # 2024-03-10 02:00 EST jumps to 03:00 EDT (07:00 UTC): a 02:00-03:00 window never opens.
    s = schedule(("America/New_York", ("Sun",), "02:00", "03:00"))
    day_start = datetime(2024, 3, 10, 5, tzinfo=UTC)
    assert not any(s.in_window(day_start + k * M) for k in range(6 * 60))
    assert s.window_intervals(day_start, day_start + 6 * H) == []
    # The week before, the same window is open for the full hour.
    week_before = s.window_intervals(
        datetime(2024, 3, 3, tzinfo=UTC), datetime(2024, 3, 4, tzinfo=UTC)
    )
    assert week_before == [
        Interval(datetime(2024, 3, 3, 7, tzinfo=UTC), datetime(2024, 3, 3, 8, tzinfo=UTC))
    ]


def test_dst_spring_forward_window_opens_at_the_jump() -> None:
    # 02:30-03:30: the clock jumps from 01:59:59 EST to 03:00 EDT, already past 02:30.
    s = schedule(("America/New_York", ("Sun",), "02:30", "03:30"))
    assert not s.in_window(datetime(2024, 3, 10, 6, 59, 59, tzinfo=UTC))
    assert s.in_window(datetime(2024, 3, 10, 7, tzinfo=UTC))
    assert s.window_intervals(
        datetime(2024, 3, 10, tzinfo=UTC), datetime(2024, 3, 11, tzinfo=UTC)
    ) == [Interval(datetime(2024, 3, 10, 7, tzinfo=UTC), datetime(2024, 3, 10, 7, 30, tzinfo=UTC))]


def test_dst_fall_back_repeated_hour_matches_twice() -> None:
    # 2024-11-03 02:00 EDT falls back to 01:00 EST (06:00 UTC): 01:xx happens twice.
    s = schedule(("America/New_York", ("Sun",), "01:00", "02:00"))
    assert s.in_window(datetime(2024, 11, 3, 5, 30, tzinfo=UTC))  # 01:30 EDT
    assert s.in_window(datetime(2024, 11, 3, 6, 30, tzinfo=UTC))  # 01:30 EST
    assert not s.in_window(datetime(2024, 11, 3, 7, tzinfo=UTC))  # 02:00 EST
    day = (datetime(2024, 11, 3, tzinfo=UTC), datetime(2024, 11, 4, tzinfo=UTC))
    assert s.window_intervals(*day) == [
        Interval(datetime(2024, 11, 3, 5, tzinfo=UTC), datetime(2024, 11, 3, 7, tzinfo=UTC))
    ]


def test_dst_fall_back_window_starting_inside_repeated_hour_opens_twice() -> None:
    s = schedule(("America/New_York", ("Sun",), "01:30", "03:00"))
    day = (datetime(2024, 11, 3, tzinfo=UTC), datetime(2024, 11, 4, tzinfo=UTC))
    assert s.window_intervals(*day) == [
        Interval(datetime(2024, 11, 3, 5, 30, tzinfo=UTC), datetime(2024, 11, 3, 6, tzinfo=UTC)),
        Interval(datetime(2024, 11, 3, 6, 30, tzinfo=UTC), datetime(2024, 11, 3, 8, tzinfo=UTC)),
    ]


# --- fleetgate's extensions: wrap, 24:00 ------------------------------------------------------


def test_window_wrapping_past_midnight_is_one_occurrence() -> None:
    s = schedule(("UTC", ("Sat",), "23:00", "01:00"))
    assert shape(("UTC", ("Sat",), "23:00", "01:00")) == (168 * H, 2 * H, 166 * H)
    assert s.in_window(datetime(2024, 1, 6, 23, 30, tzinfo=UTC))  # Saturday
    assert s.in_window(datetime(2024, 1, 7, 0, 59, tzinfo=UTC))  # Sunday, carried over
    assert not s.in_window(datetime(2024, 1, 7, 1, tzinfo=UTC))
    assert not s.in_window(datetime(2024, 1, 7, 23, 30, tzinfo=UTC))  # Sunday is not a start day
    assert not s.in_window(datetime(2024, 1, 6, 0, 30, tzinfo=UTC))  # Friday did not start one
    assert s.window_intervals(ANCHOR, ANCHOR + WEEK) == [
        Interval(datetime(2024, 1, 6, 23, tzinfo=UTC), datetime(2024, 1, 7, 1, tzinfo=UTC))
    ]


def test_reference_split_leaves_a_one_minute_gap_that_wrapping_removes() -> None:
    split = shape(("UTC", ("Sat",), "23:00", "23:59"), ("UTC", ("Sun",), "00:00", "01:00"))
    assert split[1:] == (59 * M, M)
    assert shape(("UTC", ("Sat",), "23:00", "01:00"))[1] == 2 * H


def test_end_2400_closes_at_midnight_and_meets_the_next_day() -> None:
    s = schedule(("UTC", ("Sat",), "22:00", "24:00"), ("UTC", ("Sun",), "00:00", "02:00"))
    assert [(o.start, o.length) for o in s.occurrences()] == [(142 * H, 4 * H)]
    assert s.in_window(datetime(2024, 1, 6, 23, 59, 59, tzinfo=UTC))
    assert s.window_intervals(ANCHOR, ANCHOR + WEEK) == [
        Interval(datetime(2024, 1, 6, 22, tzinfo=UTC), datetime(2024, 1, 7, 2, tzinfo=UTC))
    ]


def test_wrapping_rule_length() -> None:
    rule = WindowRule.compile(MaintenanceWindow("UTC", ("Mon",), "22:00", "02:00"))
    assert rule.wraps and rule.length == 4 * H
    whole_day = WindowRule.compile(MaintenanceWindow("UTC", ("Mon",), "00:00", "24:00"))
    assert not whole_day.wraps and whole_day.length == 24 * H


# --- exclusions -------------------------------------------------------------------------------

CHRISTMAS = Exclusion(datetime(2024, 12, 24, tzinfo=UTC), datetime(2024, 12, 27, tzinfo=UTC))
DAILY_UTC = ("UTC", DAY_NAMES, "02:00", "04:00")


def test_exclusion_closes_the_schedule_but_not_the_window() -> None:
    s = schedule(DAILY_UTC, exclusions=[CHRISTMAS])
    inside = datetime(2024, 12, 25, 3, tzinfo=UTC)
    assert s.in_window(inside) and not s.is_open(inside)
    assert s.exclusion_at(inside) == CHRISTMAS
    assert s.is_open(datetime(2024, 12, 27, 3, tzinfo=UTC))  # end is exclusive
    assert s.exclusion_at(CHRISTMAS.start) == CHRISTMAS  # start is inclusive


def test_exclusions_take_no_part_in_the_weekly_shape() -> None:
    assert schedule(DAILY_UTC, exclusions=[CHRISTMAS]).shape() == schedule(DAILY_UTC).shape()


def test_open_intervals_subtract_exclusions() -> None:
    partial = Exclusion(
        datetime(2024, 12, 23, 3, tzinfo=UTC), datetime(2024, 12, 24, 2, 30, tzinfo=UTC)
    )
    s = schedule(DAILY_UTC, exclusions=[partial])
    got = s.open_intervals(datetime(2024, 12, 23, tzinfo=UTC), datetime(2024, 12, 25, tzinfo=UTC))
    assert got == [
        Interval(datetime(2024, 12, 23, 2, tzinfo=UTC), datetime(2024, 12, 23, 3, tzinfo=UTC)),
        Interval(datetime(2024, 12, 24, 2, 30, tzinfo=UTC), datetime(2024, 12, 24, 4, tzinfo=UTC)),
    ]


def test_overlapping_exclusions_report_the_one_ending_last() -> None:
    later = Exclusion(datetime(2024, 12, 25, tzinfo=UTC), datetime(2025, 1, 2, tzinfo=UTC))
    s = schedule(DAILY_UTC, exclusions=[CHRISTMAS, later])
    assert s.exclusion_at(datetime(2024, 12, 26, tzinfo=UTC)) == later


def test_next_transition_skips_an_exclusion() -> None:
    s = schedule(DAILY_UTC, exclusions=[CHRISTMAS])
    before = datetime(2024, 12, 23, 5, tzinfo=UTC)
    assert s.next_transition(before) == datetime(2024, 12, 27, 2, tzinfo=UTC)
    assert s.next_transition(before, exclusions=False) == datetime(2024, 12, 24, 2, tzinfo=UTC)


def test_next_transition_at_exclusion_start_inside_a_window() -> None:
    cut = Exclusion(datetime(2024, 12, 23, 3, tzinfo=UTC), datetime(2024, 12, 23, 5, tzinfo=UTC))
    s = schedule(DAILY_UTC, exclusions=[cut])
    assert s.next_transition(datetime(2024, 12, 23, 2, 15, tzinfo=UTC)) == cut.start
    assert s.next_transition(cut.start) == datetime(2024, 12, 24, 2, tzinfo=UTC)


def test_next_transition_of_a_continuous_schedule() -> None:
    always = schedule(("UTC", DAY_NAMES, "00:00", "24:00"))
    assert always.next_transition(ANCHOR) is None
    s = schedule(("UTC", DAY_NAMES, "00:00", "24:00"), exclusions=[CHRISTMAS])
    assert s.next_transition(ANCHOR) == CHRISTMAS.start
    assert s.next_transition(CHRISTMAS.start) == CHRISTMAS.end
    assert s.next_transition(CHRISTMAS.end) is None


# --- validation -------------------------------------------------------------------------------


def test_compile_reports_every_bad_field_with_its_path() -> None:
    bad = [
        MaintenanceWindow("Mars/Olympus", ("Wed", "Caturday"), "24:00", "7:00"),
        MaintenanceWindow("UTC", (), "02:00", "02:00"),
    ]
    with pytest.raises(WindowError) as caught:
        Schedule.compile(bad, [Exclusion(CHRISTMAS.end, CHRISTMAS.start)])
    assert caught.value.errors == (
        "spec.maintenanceWindows[0].timezone: unknown time zone 'Mars/Olympus'",
        "spec.maintenanceWindows[0].days[1]: unknown day 'Caturday' (expected one of Mon, Tue, "
        "Wed, Thu, Fri, Sat, Sun)",
        "spec.maintenanceWindows[0].start: must be a time HH:MM between 00:00 and 23:59, "
        "got '24:00'",
        "spec.maintenanceWindows[0].end: must be a time HH:MM between 00:00 and 24:00, got '7:00'",
        "spec.maintenanceWindows[1].days: must name at least one day",
        "spec.maintenanceWindows[1].end: must differ from start (02:00); use 00:00-24:00 for a "
        "whole day",
        "spec.exclusions[0].end: must be after start",
    )


@pytest.mark.parametrize("days", [("Mon", "Mon"), ("Mon", "mon"), ("Mon", " MON ")])
def test_a_window_may_not_repeat_a_day(days: tuple[str, ...]) -> None:
    window = MaintenanceWindow("UTC", ("Tue", *days), "02:00", "04:00")
    with pytest.raises(WindowError) as caught:
        Schedule.compile([window], [])
    assert caught.value.errors == (
        f"spec.maintenanceWindows[0].days[2]: {days[1]!r} repeats Mon (already days[1]); "
        "name each day once",
    )


def test_naive_exclusion_is_rejected() -> None:
    with pytest.raises(WindowError, match=r"exclusions\[0\]\.start: must carry a UTC offset"):
        Schedule.compile([], [Exclusion(datetime(2024, 1, 1), CHRISTMAS.end)])


@pytest.mark.parametrize(("text", "day"), [("Mon", 0), (" wed ", 2), ("SUN", 6), ("Sunday", None)])
def test_parse_day(text: str, day: int | None) -> None:
    assert parse_day(text) == day


@pytest.mark.parametrize(
    ("text", "minutes", "midnight"),
    [
        ("00:00", 0, False),
        ("23:59", 1439, False),
        ("24:00", None, False),
        ("24:00", 1440, True),
        ("2:00", None, False),
        ("12:60", None, False),
        ("24:01", None, True),
        ("01:00\n", None, False),  # the CRD's pattern, anchored as Go anchors it (issue 43)
        ("\u0661\u0662:00", None, False),  # Arabic-Indic digits are no Go [0-9]
    ],
)
def test_parse_clock(text: str, minutes: int | None, midnight: bool) -> None:
    assert parse_clock(text, allow_midnight_end=midnight) == minutes


# --- properties -------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    window_lists(), instants(), st.lists(st.integers(0, 9 * 24 * 3600 - 1), min_size=1, max_size=20)
)
def test_intervals_agree_with_membership(windows, start, probes) -> None:
    s = Schedule.compile(windows)
    end = start + timedelta(days=9)
    intervals = s.window_intervals(start, end)
    for a, b in pairwise(intervals):
        assert a.end < b.start  # sorted, disjoint, merged
    for offset in probes:
        t = start + timedelta(seconds=offset)
        assert s.in_window(t) == any(i.start <= t < i.end for i in intervals)


@settings(max_examples=60, deadline=None)
@given(window_lists(), instants())
def test_next_transition_is_the_first_change(windows, after) -> None:
    s = Schedule.compile(windows)
    change = s.next_transition(after)
    if change is None:
        assert s.window_intervals(after, after + 2 * WEEK) in (
            [],
            [Interval(after, after + 2 * WEEK)],
        )
        return
    assert change > after
    assert s.is_open(change) != s.is_open(after)
    assert s.is_open(max(after, change - timedelta(seconds=1))) == s.is_open(after)


@settings(max_examples=80, deadline=None)
@given(window_lists())
def test_anchor_week_intervals_match_the_canonical_occurrences(windows) -> None:
    # In the anchor week every zone is at the offset the canonical placement used.
    s = Schedule.compile(windows)
    occurrences = s.occurrences()
    open_time = sum((i.length for i in s.window_intervals(ANCHOR, ANCHOR + WEEK)), timedelta(0))
    assert open_time == min(WEEK, sum((o.length for o in occurrences), timedelta(0)))
    shape_ = s.shape()
    assert shape_.period > timedelta(0) and timedelta(0) < shape_.shortest <= WEEK
    if shape_.gap is not None:
        assert timedelta(0) < shape_.gap and shape_.gap + shape_.shortest <= WEEK


@settings(max_examples=60, deadline=None)
@given(
    window_lists(),
    st.lists(
        instants(datetime(2024, 12, 20, tzinfo=UTC), datetime(2025, 1, 10, tzinfo=UTC)),
        min_size=1,
        max_size=12,
    ),
    st.booleans(),
)
def test_remembered_spans_answer_as_a_fresh_schedule_does(windows, asked, excluded) -> None:
    """A schedule asked pass after pass (in any order) answers what a new one answers."""
    exclusions = [CHRISTMAS] if excluded else []
    kept = Schedule.compile(windows, exclusions)
    for at in asked:
        fresh = Schedule.compile(windows, exclusions)
        assert kept.is_open(at) == fresh.is_open(at)
        assert kept.next_transition(at) == fresh.next_transition(at)
        assert kept.next_transition(at, exclusions=False) == fresh.next_transition(
            at, exclusions=False
        )
        after = fresh.next_transition(at)
        if after is not None:  # the next span is asked about too, as a status does
            assert kept.next_transition(after) == Schedule.compile(
                windows, exclusions
            ).next_transition(after)
