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
        ("@every 1h", r"schedule: unsupported descriptor '@every 1h'"),
        ("@reboot", r"schedule: unsupported descriptor"),
        ("@HOURLY", r"schedule: unsupported descriptor '@HOURLY'"),  # robfig's names are exact
        ("@hourly2", r"schedule: unsupported descriptor"),
        ("0 0 * *", r"schedule: expected 5 fields"),
        ("0 0 0 * * *", r"expected 5 fields"),
        ("", r"expected 5 fields"),
        ("60 * * * *", r"schedule \(minute\): '60' is outside 0-59"),
        ("* 24 * * *", r"schedule \(hour\): '24' is outside 0-23"),
        ("* * 0 * *", r"schedule \(day of month\): '0' is outside 1-31"),
        ("* * * 13 *", r"schedule \(month\)"),
        ("* * * * 7", r"schedule \(day of week\): '7' is outside 0-6"),
        ("* * L * *", r"schedule \(day of month\): 'L' is not a number or a name"),
        ("* * * * 1#2", r"schedule \(day of week\)"),
        ("*/0 * * * *", r"schedule \(minute\): step must be a positive number"),
        ("*/-2 * * * *", r"schedule \(minute\): '-2' is negative"),
        ("*//2 * * * *", r"schedule \(minute\): too many slashes"),
        ("5--5 * * * *", r"schedule \(minute\): too many hyphens"),
        ("-5 * * * *", r"schedule \(minute\): '' is not a number"),
        ("5-1 * * * *", r"schedule \(minute\): '5-1' runs backwards"),
        ("* * * JANUARY *", r"schedule \(month\): 'JANUARY' is not a number or a name"),
        ("99999999999999999999 * * * *", r"schedule \(minute\): .* is out of range"),
        # Digits robfig (Go's strconv.Atoi) does not read: ASCII only (issue 43).
        ("\u00b9 * * * *", r"schedule \(minute\): '\u00b9' is not a number"),  # superscript one
        ("\u0663 * * * *", r"schedule \(minute\): '\u0663' is not a number"),  # Arabic-Indic 3
        ("0 \uff11 * * *", r"schedule \(hour\)"),  # FULLWIDTH DIGIT ONE
        # U+001C is whitespace to Python, not to Go: one field of "0\x1c0", not two.
        ("0\x1c0 * * *", r"expected 5 fields"),
        # robfig's TestErrors and TestParseScheduleErrors (the five-field ones).
        ("xyz", r"expected 5 fields"),
        ("0 60 * * *", r"schedule \(hour\)"),
        ("0 0 * * XYZ", r"schedule \(day of week\)"),
        ("5 j * * *", r"schedule \(hour\)"),
        ("@unrecognized", r"unsupported descriptor"),
    ],
)
def test_what_karpenter_cannot_read_is_refused_with_the_field_named(
    text: str, message: str
) -> None:
    with pytest.raises(CronError, match=message):
        parse_cron(text)


@pytest.mark.parametrize(
    ("text", "same_as"),
    [
        ("*-5 * * * *", "* * * * *"),  # robfig ignores what follows a star's hyphen
        ("?-x 0 * * *", "* 0 * * *"),
        ("+5 * * * *", "5 * * * *"),  # Go's Atoi takes a plus sign
        ("+5-+10/+2 * * * *", "5-10/2 * * * *"),
        ("05 * * * *", "5 * * * *"),
        ("1,,2 * * * *", "1,2 * * * *"),  # FieldsFunc skips empty items
        (",5, * * * *", "5 * * * *"),
        ("  0 0 * * *\n", "0 0 * * *"),  # TrimSpace after Karpenter's "TZ=UTC " prefix
        ("\u00a00\u30000 * * *", "0 0 * * *"),  # NBSP and IDEOGRAPHIC SPACE are Go spaces
        (" @hourly\t", "0 * * * *"),
        ("0 0 * * mOn", "0 0 * * 1"),
        ("0 0 * * Mon/2", "0 0 * * 1,3,5"),  # a named start with a step runs to the end
        ("0 0 * * 0-6", "0 0 * * *"),
    ],
)
def test_what_robfig_accepts_reads_as_robfig_reads_it(text: str, same_as: str) -> None:
    assert hits(text, count=6) == hits(same_as, count=6)


def test_a_field_of_nothing_but_commas_never_fires() -> None:
    never = parse_cron(", * * * *")
    assert not never.fires
    assert never.next_after(T) is None


@pytest.mark.parametrize(
    "text",
    [
        "0 0 30 2 *",  # robfig's "Unsatisfiable" cases
        "0 0 31 4 *",
        "0 0 31 2,4,6,9,11 *",
        "0 0 30,31 feb *",
    ],
)
def test_a_schedule_that_never_fires_reads_but_has_no_next_firing(text: str) -> None:
    schedule = parse_cron(text)
    assert not schedule.fires
    assert schedule.next_after(T) is None
    assert schedule.last_at_or_before(T) is None


def test_rare_schedules_still_fire() -> None:
    assert parse_cron("0 0 29 2 *").fires  # every leap year, within robfig's 5 years
    assert parse_cron("0 0 31 2 mon").fires  # both restricted: any Monday in February
    assert parse_cron("0 0 30 * *").fires


def _at(text: str) -> datetime:
    """A time of robfig's spec_test.go ("Mon Jul 9 15:00 2012"), in UTC."""
    for layout in ("%a %b %d %H:%M %Y", "%a %b %d %H:%M:%S %Y"):
        try:
            return datetime.strptime(text, layout).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise ValueError(text)


# robfig/cron spec_test.go TestActivation (ParseStandard): fires exactly at ``time`` or not.
@pytest.mark.parametrize(
    ("time", "spec", "fires"),
    [
        ("Mon Jul 9 15:00 2012", "0/15 * * * *", True),
        ("Mon Jul 9 15:45 2012", "0/15 * * * *", True),
        ("Mon Jul 9 15:40 2012", "0/15 * * * *", False),
        ("Mon Jul 9 15:05 2012", "5/15 * * * *", True),
        ("Mon Jul 9 15:20 2012", "5/15 * * * *", True),
        ("Mon Jul 9 15:50 2012", "5/15 * * * *", True),
        ("Sun Jul 15 15:00 2012", "0/15 * * Jul *", True),
        ("Sun Jul 15 15:00 2012", "0/15 * * Jun *", False),
        ("Sun Jul 15 08:30 2012", "30 08 ? Jul Sun", True),
        ("Sun Jul 15 08:30 2012", "30 08 15 Jul ?", True),
        ("Mon Jul 16 08:30 2012", "30 08 ? Jul Sun", False),
        ("Mon Jul 16 08:30 2012", "30 08 15 Jul ?", False),
        ("Mon Jul 9 15:00 2012", "@hourly", True),
        ("Mon Jul 9 15:04 2012", "@hourly", False),
        ("Mon Jul 9 15:00 2012", "@daily", False),
        ("Mon Jul 9 00:00 2012", "@daily", True),
        ("Mon Jul 9 00:00 2012", "@weekly", False),
        ("Sun Jul 8 00:00 2012", "@weekly", True),
        ("Sun Jul 8 01:00 2012", "@weekly", False),
        ("Sun Jul 8 00:00 2012", "@monthly", False),
        ("Sun Jul 1 00:00 2012", "@monthly", True),
        ("Sun Jul 15 00:00 2012", "* * 1,15 * Sun", True),
        ("Fri Jun 15 00:00 2012", "* * 1,15 * Sun", True),
        ("Wed Aug 1 00:00 2012", "* * 1,15 * Sun", True),
        ("Sun Jul 15 00:00 2012", "* * */10 * Sun", True),
        ("Sun Jul 15 00:00 2012", "* * * * Mon", False),
        ("Mon Jul 9 00:00 2012", "* * 1,15 * *", False),
        ("Sun Jul 15 00:00 2012", "* * 1,15 * *", True),
        ("Sun Jul 15 00:00 2012", "* * */2 * Sun", True),
    ],
)
def test_robfigs_activation_table(time: str, spec: str, fires: bool) -> None:
    at = _at(time)
    assert (parse_cron(spec).next_after(at - timedelta(seconds=1)) == at) is fires


# robfig/cron spec_test.go TestNext, the UTC cases whose seconds field is 0 (dropped: the
# standard parser has no seconds field).
@pytest.mark.parametrize(
    ("time", "spec", "expected"),
    [
        ("Mon Jul 9 14:45 2012", "0/15 * * * *", "Mon Jul 9 15:00 2012"),
        ("Mon Jul 9 14:59 2012", "0/15 * * * *", "Mon Jul 9 15:00 2012"),
        ("Mon Jul 9 14:59:59 2012", "0/15 * * * *", "Mon Jul 9 15:00 2012"),
        ("Mon Jul 9 15:45 2012", "20-35/15 * * * *", "Mon Jul 9 16:20 2012"),
        ("Mon Jul 9 23:46 2012", "*/15 * * * *", "Tue Jul 10 00:00 2012"),
        ("Mon Jul 9 23:45 2012", "20-35/15 * * * *", "Tue Jul 10 00:20 2012"),
        ("Mon Jul 9 23:35 2012", "0 0 9 Apr-Oct ?", "Thu Aug 9 00:00 2012"),
        ("Mon Jul 9 23:35 2012", "0 0 */5 Apr,Aug,Oct Mon", "Tue Aug 1 00:00 2012"),
        ("Mon Jul 9 23:35 2012", "0 0 */5 Oct Mon", "Mon Oct 1 00:00 2012"),
        ("Mon Jul 9 23:35 2012", "0 0 * Feb Mon", "Mon Feb 4 00:00 2013"),
        ("Mon Jul 9 23:35 2012", "0 0 * Feb Mon/2", "Fri Feb 1 00:00 2013"),
        ("Mon Dec 31 23:59:45 2012", "* * * * *", "Tue Jan 1 00:00:00 2013"),
        ("Mon Jul 9 23:35 2012", "0 0 29 Feb ?", "Mon Feb 29 00:00 2016"),
        ("Mon Jul 9 23:35 2012", "0 0 30 Feb ?", None),
        ("Mon Jul 9 23:35 2012", "0 0 31 Apr ?", None),
    ],
)
def test_robfigs_next_table(time: str, spec: str, expected: str | None) -> None:
    want = None if expected is None else _at(expected)
    assert parse_cron(spec).next_after(_at(time)) == want
