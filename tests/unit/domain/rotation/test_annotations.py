"""Annotation keys and how their values are read: bad values are absent, never errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from fleetgate.domain.rotation import annotations as ann


def test_keys_use_the_fleetgate_prefix_and_karpenters_own() -> None:
    ours = [
        ann.ACTIVE_ROTATION,
        ann.ACTIVE_ROTATION_STATE,
        ann.DRAINING_AT,
        ann.SURGE_WAIT,
        ann.ROTATION_MODE,
        ann.LAST_ROTATION_AT,
        ann.LAST_FAILURE_AT,
        ann.FREEZE,
        ann.CLAIM_STATE,
        ann.STARTED_AT,
        ann.FAILED_AT,
        ann.RETRY_COUNT,
        ann.SURGE_CLAIM,
        ann.SURGE_FOR,
        ann.DO_NOT_DISRUPT_OWNED,
        ann.CORDONED,
    ]
    assert all(key.startswith("fleetgate.io/") for key in ours)
    assert len(set(ours)) == len(ours)
    assert ann.KARPENTER_DO_NOT_DISRUPT == "karpenter.sh/do-not-disrupt"
    assert ann.KARPENTER_NODEPOOL == "karpenter.sh/nodepool"
    assert [s.value for s in ann.ClaimState] == ["pending", "draining", "failed", "expired"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-06-03T02:00:00Z", datetime(2024, 6, 3, 2, tzinfo=UTC)),
        ("2024-06-03t02:00:00z", datetime(2024, 6, 3, 2, tzinfo=UTC)),
        ("2024-06-03T11:00:00+09:00", datetime(2024, 6, 3, 2, tzinfo=UTC)),
        ("2024-06-03T02:00:00.123456789Z", datetime(2024, 6, 3, 2, 0, 0, 123456, tzinfo=UTC)),
        (" 2024-06-03T02:00:00Z ", datetime(2024, 6, 3, 2, tzinfo=UTC)),
        ("", None),
        (None, None),
        ("2024-06-03", None),
        ("2024-06-03T02:00:00", None),  # no offset
        ("2024-13-03T02:00:00Z", None),  # well-formed, not a date
        ("yesterday", None),
    ],
)
def test_parse_timestamp(text: str | None, expected: datetime | None) -> None:
    assert ann.parse_timestamp(text) == expected


def test_format_timestamp_is_utc_at_second_precision() -> None:
    tokyo = timezone(timedelta(hours=9))
    instant = datetime(2024, 6, 3, 11, 0, 0, 987654, tzinfo=tokyo)
    assert ann.format_timestamp(instant) == "2024-06-03T02:00:00Z"
    assert ann.parse_timestamp(ann.format_timestamp(instant)) == instant.replace(microsecond=0)
    with pytest.raises(ValueError, match="timezone-aware"):
        ann.format_timestamp(datetime(2024, 6, 3))


@pytest.mark.parametrize(
    "instant",
    [
        datetime(2024, 1, 3, 2, 0, 59, 999999, tzinfo=UTC),
        datetime(1999, 12, 31, 23, 59, 59, tzinfo=timezone(timedelta(hours=-5))),
        datetime(2999, 6, 30, 12, tzinfo=ZoneInfo("Asia/Tokyo")),
        datetime(999, 1, 1, tzinfo=UTC),  # short years take the C library's text
        datetime(1, 1, 1, 9, tzinfo=timezone(timedelta(hours=9))),
    ],
)
def test_format_timestamp_writes_what_strftime_writes(instant: datetime) -> None:
    expected = instant.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert ann.format_timestamp(instant) == expected


def test_a_repeated_local_hour_formats_as_two_instants() -> None:
    # The two 01:30s of New York's first November Sunday compare and hash equal (same zone,
    # fold ignored) yet are an hour apart.
    new_york = ZoneInfo("America/New_York")
    first = datetime(2024, 11, 3, 1, 30, tzinfo=new_york)
    second = first.replace(fold=1)
    assert first == second
    assert ann.format_timestamp(first) == "2024-11-03T05:30:00Z"
    assert ann.format_timestamp(second) == "2024-11-03T06:30:00Z"
    assert ann.format_timestamp(first) == "2024-11-03T05:30:00Z"


def test_read_timestamp_from_annotations() -> None:
    annotations = {ann.FREEZE: "2024-06-03T02:00:00Z", ann.LAST_ROTATION_AT: "garbage"}
    assert ann.read_timestamp(annotations, ann.FREEZE) == datetime(2024, 6, 3, 2, tzinfo=UTC)
    assert ann.read_timestamp(annotations, ann.LAST_ROTATION_AT) is None
    assert ann.read_timestamp(annotations, ann.LAST_FAILURE_AT) is None


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("3", 3),
        ("012", 12),
        ("x", 0),
        (None, 0),
        ("", 0),
        # Only ASCII digits count, as in the reference controller: int() accepts all of these.
        (" 3", 0),
        (" 2 ", 0),
        ("1_0", 0),
        ("+3", 0),
        ("-1", 0),
        ("\u0663", 0),  # ARABIC-INDIC DIGIT THREE
    ],
)
def test_parse_retry_count(text: str | None, count: int) -> None:
    assert ann.parse_retry_count(text) == count
