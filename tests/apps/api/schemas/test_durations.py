"""The duration patterns the API publishes: every string they admit is one the server takes."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from hypothesis import given, settings

from fleetgate.apps.api.schemas.durations import DURATION, POSITIVE_DURATION
from fleetgate.domain.durations import parse_duration
from tests.strategies import matching


@settings(max_examples=500, deadline=None)
@given(matching(POSITIVE_DURATION))
def test_a_positive_duration_parses_to_more_than_zero(text: str) -> None:
    assert parse_duration(text) > timedelta(0)


@settings(max_examples=500, deadline=None)
@given(matching(DURATION))
def test_a_duration_parses_to_zero_or_more(text: str) -> None:
    assert parse_duration(text) >= timedelta(0)


@pytest.mark.parametrize(
    ("text", "any_", "positive"),
    [
        ("15m", True, True),
        ("1h30m", True, True),
        ("1.5h", True, True),
        ("0.5s", True, True),
        ("14d", True, True),
        ("2000ns", True, True),
        ("1µs", True, True),
        ("0s", True, False),  # zero: a duration, not a positive one
        ("0h0m", True, False),
        ("1ns", False, False),  # finer than the microsecond the server keeps
        ("0.0000001s", False, False),
        ("-1m", False, False),  # the server refuses negative durations wherever they appear
        ("1000000d", False, False),  # bounded, so no sum overflows
        ("15", False, False),
        ("", False, False),
    ],
)
def test_the_patterns_admit_exactly_these(text: str, any_: bool, positive: bool) -> None:
    assert bool(re.fullmatch(DURATION, text)) is any_
    assert bool(re.fullmatch(POSITIVE_DURATION, text)) is positive
