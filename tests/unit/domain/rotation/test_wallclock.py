"""Wall-clock times as instants across DST: one, two (fall back) or the jump (spring forward)."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from fleetgate.domain.rotation.wallclock import instants_of_wall_time, transition_between

NY = ZoneInfo("America/New_York")
LORD_HOWE = ZoneInfo("Australia/Lord_Howe")  # DST shifts by 30 minutes


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def test_ordinary_wall_time_is_one_instant() -> None:
    assert instants_of_wall_time(datetime(2024, 1, 3, 2), NY) == {utc(2024, 1, 3, 7)}


def test_fall_back_wall_time_is_two_instants_plus_the_transition() -> None:
    # 01:30 happens at 05:30 UTC (EDT) and 06:30 UTC (EST); the clock falls back at 06:00 UTC.
    assert instants_of_wall_time(datetime(2024, 11, 3, 1, 30), NY) == {
        utc(2024, 11, 3, 5, 30),
        utc(2024, 11, 3, 6),
        utc(2024, 11, 3, 6, 30),
    }


def test_spring_forward_wall_time_is_the_jump() -> None:
    # 02:30 never shows on 2024-03-10: the clock jumps from 02:00 EST to 03:00 EDT at 07:00 UTC.
    assert instants_of_wall_time(datetime(2024, 3, 10, 2, 30), NY) == {utc(2024, 3, 10, 7)}


def test_half_hour_shift() -> None:
    # Lord Howe springs forward from 02:00 to 02:30 (+10:30 -> +11:00) on 2024-10-06.
    assert instants_of_wall_time(datetime(2024, 10, 6, 2, 15), LORD_HOWE) == {
        utc(2024, 10, 5, 15, 30)
    }


def test_transition_between_finds_the_first_second_of_the_new_offset() -> None:
    found = transition_between(utc(2024, 3, 10, 6, 30), utc(2024, 3, 10, 7, 30), NY)
    assert found == utc(2024, 3, 10, 7)
    assert (
        found.astimezone(NY).utcoffset() != utc(2024, 3, 10, 6, 59, 59).astimezone(NY).utcoffset()
    )
