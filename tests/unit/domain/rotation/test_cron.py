"""The cron matcher of disruption-budget schedules (robfig/cron's standard parser, in UTC)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleetgate.domain.rotation.cron import CronError, parse_cron

T = datetime(2024, 1, 1, tzinfo=UTC)  # a Monday


def hits(text: str, start: datetime = T, count: int = 4) -> list[datetime]:
    schedule, out, at = parse_cron(text), [], start
    for _ in range(count):
        nxt = schedule.next_after(at)
        assert nxt is not None
        out.append(nxt)
        at = nxt
    return out


@pytest.mark.parametrize(
    ("macro", "fields"),
    [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
    ],
)
def test_karpenters_macros_are_their_five_field_forms(macro: str, fields: str) -> None:
    assert hits(macro, count=3) == hits(fields, count=3)


def test_ranges_steps_lists_and_names() -> None:
    assert hits("*/15 9-10 * * MON-fri", count=3) == [
        T.replace(hour=9),
        T.replace(hour=9, minute=15),
        T.replace(hour=9, minute=30),
    ]
    assert [h.hour for h in hits("0 1,5,23 * * *", count=4)] == [1, 5, 23, 1]
    # "N/S" runs from N to the field's end.
    assert [h.minute for h in hits("50/5 0 * * *", count=3)] == [50, 55, 50]
    assert hits("0 0 1 feb *", count=1) == [datetime(2024, 2, 1, tzinfo=UTC)]
    assert hits("0 0 29 2 *", count=1) == [datetime(2024, 2, 29, tzinfo=UTC)]
    assert hits("0 0 ? * sat", count=1) == [datetime(2024, 1, 6, tzinfo=UTC)]


def test_day_of_month_and_week_match_either_only_when_both_are_restricted() -> None:
    # Both restricted: the 15th or any Sunday.
    assert [h.day for h in hits("0 0 15 * 0", count=3)] == [7, 14, 15]
    # Day of week "*": both must match, so only the 15th.
    assert [h.month for h in hits("0 0 15 * *", count=2)] == [1, 2]
    # A stepped star is a restriction (robfig drops the star bit for a step above 1).
    assert [h.day for h in hits("0 0 */10 * 0", count=4)] == [7, 11, 14, 21]


def test_the_last_hit_at_or_before_and_the_next_strictly_after() -> None:
    daily = parse_cron("@daily")
    assert daily.last_at_or_before(T) == T
    assert daily.last_at_or_before(T - timedelta(microseconds=1)) == T - timedelta(days=1)
    assert daily.next_after(T) == T + timedelta(days=1)
    assert daily.next_after(T - timedelta(seconds=30)) == T
    assert parse_cron("0 0 30 2 *").next_after(T) is None  # February has no 30th


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("@every 1h", r"schedule: unsupported macro '@every 1h'"),
        ("@reboot", r"schedule: unsupported macro"),
        ("0 0 * *", r"schedule: expected 5 fields"),
        ("0 0 0 * * *", r"expected 5 fields"),
        ("60 * * * *", r"schedule \(minute\): '60' is outside 0-59"),
        ("* 24 * * *", r"schedule \(hour\): '24' is outside 0-23"),
        ("* * 0 * *", r"schedule \(day of month\): '0' is outside 1-31"),
        ("* * * 13 *", r"schedule \(month\)"),
        ("* * * * 7", r"schedule \(day of week\): '7' is outside 0-6"),
        ("* * L * *", r"schedule \(day of month\): 'L' is not a number or a name"),
        ("* * * * 1#2", r"schedule \(day of week\)"),
        ("*/0 * * * *", r"schedule \(minute\): step must be a positive number"),
        ("5-1 * * * *", r"schedule \(minute\): '5-1' runs backwards"),
        ("1,,2 * * * *", r"schedule \(minute\): empty list item"),
        ("* * * JANUARY *", r"schedule \(month\): 'JANUARY' is not a number or a name"),
    ],
)
def test_what_karpenter_cannot_read_is_refused_with_the_field_named(
    text: str, message: str
) -> None:
    with pytest.raises(CronError, match=message):
        parse_cron(text)
