"""The dashboard's details: dated, zoned hour axes; a legend per colour; every namespace's usage;
each node's age against A and its forced expiry."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from itertools import pairwise
from zoneinfo import ZoneInfo

from fleetgate.apps.api.dashboard import render
from tests.apps.api.dashboard.sample import node, snapshot

TOKYO = {
    # Eight days, as `fleetgate up` draws a weekly policy: 3/4 behind now, 1/4 ahead.
    "start": "2024-01-01T00:00:00+00:00",
    "end": "2024-01-09T00:00:00+00:00",
    "zone": "Asia/Tokyo",
    "windows": [{"start": "2024-01-06T17:00:00+00:00", "end": "2024-01-06T21:00:00+00:00"}],
    "rotations": [],
}


def test_an_eight_day_timeline_is_dated_in_its_zone_with_half_day_ticks() -> None:
    svg = render.timeline(TOKYO, "2024-01-07T00:00:00+00:00")
    assert "times in Asia/Tokyo" in svg
    # The ends carry the date in Tokyo (UTC+9), not one day's clock time.
    assert "Mon 01 Jan 2024 09:00 JST" in svg and "Tue 09 Jan 2024 09:00 JST" in svg
    marks = re.findall(r'<text class="tl-mark( major)?"[^>]*>([^<]+)</text>', svg)
    dates = [label for major, label in marks if major]
    # Every Tokyo midnight in the span is a dated major tick: 02 Jan .. 09 Jan.
    assert dates == [f"{day} {n:02d} Jan" for day, n in zip(
        ("Tue", "Wed", "Thu", "Fri", "Sat", "Sun", "Mon", "Tue"), range(2, 10), strict=True
    )]  # fmt: skip
    assert {label for major, label in marks if not major} == {"12:00"}
    assert len(marks) <= render.MAX_TICKS + 1


def test_a_one_day_timeline_ticks_every_two_hours_and_dates_its_midnight() -> None:
    start = datetime(2024, 1, 1, 4, 5, tzinfo=UTC)
    ticks = render.axis_ticks(start, start.replace(day=2), ZoneInfo("UTC"))
    labels = [label for _, label, _ in ticks]
    assert labels[:3] == ["06:00", "08:00", "10:00"] and "Tue 02 Jan" in labels
    assert [at for at, _, major in ticks if major] == [datetime(2024, 1, 2, tzinfo=UTC)]


def test_ticks_fall_on_whole_local_hours_in_a_half_hour_zone_and_across_dst() -> None:
    kolkata = ZoneInfo("Asia/Kolkata")  # UTC+05:30
    start = datetime(2024, 1, 1, tzinfo=UTC)
    ticks = render.axis_ticks(start, start.replace(hour=12), kolkata)
    assert ticks and all(at.astimezone(kolkata).minute == 0 for at, _, _ in ticks)
    berlin = ZoneInfo("Europe/Berlin")  # 2024-03-31 02:00 local is skipped
    start = datetime(2024, 3, 30, 12, tzinfo=UTC)
    ticks = render.axis_ticks(start, start.replace(day=31), berlin)
    assert [label for _, label, _ in ticks].count("Sun 31 Mar") == 1
    assert all(at.astimezone(berlin).hour % 2 == 0 for at, _, _ in ticks)


def test_an_unknown_zone_is_drawn_in_utc_and_says_so() -> None:
    svg = render.timeline({**TOKYO, "zone": "Mars/Olympus"}, "2024-01-07T00:00:00+00:00")
    assert "times in UTC" in svg and "Mon 01 Jan 2024 00:00 UTC" in svg


def test_every_colour_on_the_page_has_a_legend_entry() -> None:
    nodes = render.nodes(snapshot())
    legend = nodes[nodes.index('data-legend="bars"') :]
    for level in ("ok", "high", "over"):
        assert f'class="bar-fill {level}"' in legend  # the amber and red demand bars included
    assert "demand over budget" in legend
    svg = render.timeline(snapshot()["pools"][0]["timeline"], "2024-01-01T10:05:00+00:00")
    caption = svg[svg.index("<figcaption>") :]
    for shape in ("tl-window", "tl-rotation", "tl-rotation success", "tl-rotation failure"):
        assert f'<rect class="{shape}"' in caption
    assert 'class="tl-now"' in caption and 'class="tl-tick major"' in caption


def test_every_namespace_shows_its_usage_claimed_or_not() -> None:
    html = render.namespaces(snapshot())
    rows = re.findall(r'<tr data-namespace="([^"]+)" data-claimed="([^"]+)">', html)
    assert rows == [("ci", "true"), ("web", "false")]
    web = html[html.index('data-namespace="web"') :]
    assert "unclaimed" in web and '<td class="num">10</td>' in web
    assert '<td class="num">4,096 MB</td>' in web
    assert render.namespaces(snapshot(namespaces=[])) == '<p class="empty">No placements.</p>'
    assert html in render.page(snapshot())


def test_a_node_row_shows_its_age_against_a_and_its_forced_expiry() -> None:
    html = render.nodes(snapshot())
    first = html.split('<tr data-node="general-0002"')[0]
    assert 'data-dimension="age"' in first and "30h of A 46h43m (under A)" in first
    assert "forced expiry 2024-01-03 04:05 UTC" in first
    old = node(
        "old", 1, lifetime={**node("x", 1)["lifetime"], "age": "50h", "age_seconds": 50 * 3600.0}
    )
    html = render.nodes(snapshot(nodes=[old]))
    assert "(past A)" in html and 'data-dimension="age"' in html
    assert re.search(r'data-dimension="age"[^>]*data-level="over"', html)


def test_a_node_without_a_derivation_or_expiry_or_claim_says_so() -> None:
    life = {"age": "2h", "age_seconds": 7200.0, "A": None, "A_seconds": None, "expires_at": None}
    html = render.nodes(snapshot(nodes=[node("n", 1, lifetime=life)]))
    assert "2h old (A not derived yet)" in html and "never (no expireAfter)" in html
    assert 'data-dimension="age"' not in html
    assert "no NodeClaim" in render.nodes(snapshot(nodes=[node("n", 1, lifetime=None)]))


def test_a_just_finished_rotation_is_still_on_the_card_with_its_outcome() -> None:
    pool = snapshot()["pools"][0]
    recent = {
        "claim": "general-0001",
        "start": "2024-01-01T10:01:00+00:00",
        "end": "2024-01-01T10:09:00+00:00",
        "outcome": "failure",
        "forceful": True,
        "ago": "2m",
    }
    html = render.pools(snapshot(pools=[{**pool, "active": None, "recent": recent}]))
    assert '<p class="rotation recent failure" data-recent="general-0001">' in html
    assert "failure, forceful fallback, Mon 10:01–Mon 10:09 (2m ago)" in html
    assert "data-recent" not in render.pools(snapshot())


def test_every_instant_of_up_is_labelled_as_virtual_time() -> None:
    page = render.page(snapshot())
    summary = render.summary(snapshot())
    assert "virtual time</span>" in summary and "running for (virtual time)" in summary
    assert "virtual over real time" in summary
    assert 'data-clock="virtual">times are virtual time' in render.events(snapshot())
    assert "(virtual time)</small>" in render.claims(snapshot())
    assert "virtual times in UTC" in page and "now (virtual time)" in page
    real = snapshot(clock=None)  # a snapshot of a real clock says so instead
    assert "virtual" not in render.page(real) and "(real time)" in render.summary(real)


def test_a_month_long_timeline_ticks_every_other_day_and_stays_readable() -> None:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    end = datetime(2024, 1, 31, tzinfo=UTC)
    ticks = render.axis_ticks(start, end, ZoneInfo("UTC"))
    assert len(ticks) <= render.MAX_TICKS
    assert all(major and at.hour == 0 for at, _, major in ticks)
    days = [at.day for at, _, _ in ticks]
    assert {b - a for a, b in pairwise(days)} == {2}
    weeks = render.axis_ticks(start, datetime(2024, 3, 30, tzinfo=UTC), ZoneInfo("UTC"))
    assert len(weeks) <= render.MAX_TICKS and {at.weekday() for at, _, _ in weeks} == {0}
