"""Go-style durations: parsing (exact, with days), errors that quote the text, formatting."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given

from fleetgate.domain.durations import (
    DurationError,
    format_duration,
    parse_duration,
    parse_go_duration,
)
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


# --- Go's time.ParseDuration, value for value -------------------------------------------------
# The table of golang/go src/time/time_test.go (parseDurationTests, parseDurationErrorTests):
# what Kubernetes and Karpenter read with Go, fleetgate reads the same.
NS, US, MS, S, MIN, HOUR = 1, 1_000, 1_000_000, 10**9, 60 * 10**9, 3_600 * 10**9

GO_ACCEPTS = [
    ("0", 0),
    ("5s", 5 * S),
    ("30s", 30 * S),
    ("1478s", 1478 * S),
    ("-5s", -5 * S),
    ("+5s", 5 * S),
    ("-0", 0),
    ("+0", 0),
    ("5.0s", 5 * S),
    ("5.6s", 5 * S + 600 * MS),
    ("5.s", 5 * S),
    (".5s", 500 * MS),
    ("1.0s", 1 * S),
    ("1.00s", 1 * S),
    ("1.004s", 1 * S + 4 * MS),
    ("1.0040s", 1 * S + 4 * MS),
    ("100.00100s", 100 * S + 1 * MS),
    ("10ns", 10 * NS),
    ("11us", 11 * US),
    ("12µs", 12 * US),  # U+00B5
    ("12μs", 12 * US),  # U+03BC
    ("13ms", 13 * MS),
    ("14s", 14 * S),
    ("15m", 15 * MIN),
    ("16h", 16 * HOUR),
    ("3h30m", 3 * HOUR + 30 * MIN),
    ("10.5s4m", 4 * MIN + 10 * S + 500 * MS),
    ("-2m3.4s", -(2 * MIN + 3 * S + 400 * MS)),
    ("1h2m3s4ms5us6ns", HOUR + 2 * MIN + 3 * S + 4 * MS + 5 * US + 6 * NS),
    ("39h9m14.425s", 39 * HOUR + 9 * MIN + 14 * S + 425 * MS),
    ("52763797000ns", 52763797000 * NS),
    ("0.3333333333333333333h", 20 * MIN),
    ("9007199254740993ns", (1 << 53) + 1),
    ("9223372036854775807ns", (1 << 63) - 1),
    ("9223372036854775.807us", (1 << 63) - 1),
    ("9223372036s854ms775us807ns", (1 << 63) - 1),
    ("-9223372036854775808ns", -(1 << 63)),
    ("-9223372036854775.808us", -(1 << 63)),
    ("-9223372036s854ms775us808ns", -(1 << 63)),
    ("-2562047h47m16.854775808s", -(1 << 63)),
    ("0.100000000000000000000h", 6 * MIN),
    ("0.830103483285477580700h", 49 * MIN + 48 * S + 372539827 * NS),
    # Not in Go's table; what fleetgate's reading of the same text differs on.
    ("1.5ns", 1),  # Go truncates; fleetgate's own durations refuse a sub-microsecond part
    ("1h1h", 2 * HOUR),
]

GO_REFUSES = [
    "",
    "3",
    "-",
    "s",
    ".",
    "-.",
    ".s",
    "+.s",
    "1d",
    "\x85\x85",
    "\ufffd",
    "\ufffd hello \ufffd world",
    "9223372036854775810ns",
    "9223372036854775808ns",
    "-9223372036854775809ns",
    "9223372036854776us",
    "3000000h",
    "9223372036854775.808us",
    "9223372036854ms775us808ns",
    # Karpenter's annotation cases (issue 43): whitespace is a unit to Go, days are no unit.
    " 2h",
    "2h ",
    "2h\n",
    "2562048h",
    "٣h",  # ARABIC-INDIC DIGIT THREE: Go's digits are ASCII
    "²h",  # SUPERSCRIPT TWO
]


@pytest.mark.parametrize(("text", "nanoseconds"), GO_ACCEPTS)
def test_go_durations_read_as_go_reads_them(text: str, nanoseconds: int) -> None:
    assert parse_go_duration(text) == nanoseconds


@pytest.mark.parametrize("text", GO_REFUSES)
def test_what_go_refuses_is_refused(text: str) -> None:
    with pytest.raises(DurationError) as caught:
        parse_go_duration(text)
    assert repr(text) in str(caught.value)
