"""Go-style durations: parsing (exact, with days), errors that quote the text, formatting."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given

from fleetgate.domain.durations import DurationError, format_duration, parse_duration
from tests.strategies import exact_durations


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("15m", timedelta(minutes=15)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("336h", timedelta(days=14)),
        ("14d", timedelta(days=14)),
        ("1d12h", timedelta(hours=36)),
        ("1.5h", timedelta(minutes=90)),
        (".5m", timedelta(seconds=30)),
        ("5.m", timedelta(minutes=5)),
        ("90s", timedelta(seconds=90)),
        ("1500ms", timedelta(seconds=1, milliseconds=500)),
        ("2us", timedelta(microseconds=2)),
        ("2µs", timedelta(microseconds=2)),
        ("2000ns", timedelta(microseconds=2)),
        ("0", timedelta(0)),
        ("0s", timedelta(0)),
        ("-1m", timedelta(minutes=-1)),
        ("+2h", timedelta(hours=2)),
        ("1h1h", timedelta(hours=2)),  # Go sums repeated units
        (" 10m ", timedelta(minutes=10)),
    ],
)
def test_parses_go_durations_and_days(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


def test_fractions_are_exact_not_float() -> None:
    # 0.1h in binary floating point is not 360s; integer-exact parsing gives exactly 6m.
    assert parse_duration("0.1h") == timedelta(minutes=6)
    assert parse_duration("1.000001s") == timedelta(seconds=1, microseconds=1)
    assert parse_duration("2.25h") == timedelta(hours=2, minutes=15)
    # A fraction that does not land on a whole microsecond is refused, never rounded.
    with pytest.raises(DurationError, match="microsecond"):
        parse_duration("0.3333333333h")


@pytest.mark.parametrize(
    "text", ["", "15", "m", "1x", "1h 30m", "h1", "1.h.5", "--1m", "1ns", "abc", "1.2.3h"]
)
def test_rejects_invalid_text_and_quotes_it(text: str) -> None:
    with pytest.raises(DurationError) as caught:
        parse_duration(text)
    assert repr(text) in str(caught.value)


def test_rejects_sub_microsecond_rather_than_rounding() -> None:
    with pytest.raises(DurationError, match="microsecond"):
        parse_duration("1500ns")


def test_rejects_overflow() -> None:
    with pytest.raises(DurationError, match="too large"):
        parse_duration("99999999999999999h")


def test_rejects_non_string() -> None:
    with pytest.raises(DurationError):
        parse_duration(15)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (timedelta(hours=142, minutes=43), "142h43m"),
        (timedelta(hours=1, minutes=17), "1h17m"),
        (timedelta(seconds=90), "1m30s"),
        (timedelta(days=14), "336h"),
        (timedelta(0), "0s"),
        (timedelta(minutes=-1), "-1m"),
        (timedelta(hours=1, seconds=1), "1h1s"),
        (timedelta(milliseconds=1500), "1.5s"),
        (timedelta(microseconds=1), "0.000001s"),
    ],
)
def test_formats_compactly(value: timedelta, text: str) -> None:
    assert format_duration(value) == text


@given(exact_durations())
def test_format_round_trips(value: timedelta) -> None:
    assert parse_duration(format_duration(value)) == value
