"""The dashboard's HTML: bars, pools, the timeline, escaping, one renderer for every section."""

from __future__ import annotations

import re

import pytest

from fleetgate.apps.api.dashboard import render
from tests.apps.api.dashboard.sample import node, snapshot


@pytest.mark.parametrize(
    ("used", "limit", "level", "width"),
    [
        (0, 24, "ok", "0.0"),
        (12, 24, "ok", "50.0"),
        (18, 24, "high", "75.0"),
        (30, 24, "over", "100.0"),
        (5, 0, "ok", "0.0"),
    ],
)
def test_a_bar_is_sized_and_coloured_by_used_against_limit(
    used: int, limit: int, level: str, width: str
) -> None:
    html = render.bar(used, limit, "vCPU")
    assert f'data-level="{level}"' in html
    assert f'class="bar-fill {level}" width="{width}"' in html
    assert f"{used} / {limit}" in html


def test_every_section_renders_and_the_page_holds_them_all() -> None:
    snap = snapshot()
    sections = render.sections(snap)
    assert set(sections) == set(render.SECTIONS)
    page = render.page(snap)
    for html in sections.values():
        assert html in page
    assert page.startswith("<!doctype html>") and "/dashboard/static/dashboard.js" in page


def test_a_node_row_has_a_bar_per_dimension_and_one_for_demand_against_budget() -> None:
    html = render.nodes(snapshot())
    rows = re.findall(r'<tr data-node="([^"]+)" data-role="([^"]+)"', html)
    assert rows == [("general-0001", "rotating"), ("general-0002", "ready")]
    first = html.split('<tr data-node="general-0002"')[0]
    assert first.count('class="bar"') == 5  # 3 dimensions, demand, age
    assert 'data-dimension="demand" data-used="3.7" data-limit="6.0"' in first
    assert "cordoned (cluster)" in first and 'data-level="over"' in first
    assert "vs 0.75 × 8 threads" in first


def test_a_node_without_metrics_says_so_instead_of_a_demand_bar() -> None:
    html = render.nodes(snapshot(nodes=[node("n", 1, budget=None, cpu_schedulable=None)]))
    assert "no metrics yet" in html and 'data-dimension="demand"' not in html


def test_a_pool_shows_agc_findings_window_and_the_rotation_in_flight() -> None:
    html = render.pools(snapshot())
    assert '<article class="pool" data-pool="general">' in html
    assert "<dt>A</dt><dd>46h43m</dd>" in html and "<dt>C</dt><dd>18</dd>" in html
    assert "KBelowTwo" in html and 'class="window open"' in html
    assert 'class="rotation" data-claim="general-0001"' in html
    assert "data-why" not in html  # a rotation is running: nothing to explain


def test_a_pool_with_nothing_rotating_says_why_gate_first_then_census() -> None:
    pool = snapshot()["pools"][0]
    gate = {"reason": "outOfWindow", "until": "2024-01-01T22:00:00+00:00"}
    gated = {**pool, "active": None, "gate": gate}
    html = render.pools(snapshot(pools=[gated]))
    assert 'data-why="gate"' in html and "outOfWindow" in html and "Mon 22:00" in html
    counted = {**pool, "active": None, "gate": None, "reason": "noEligibleClaim"}
    html = render.pools(snapshot(pools=[counted]))
    assert 'data-why="census"' in html
    assert "noEligibleClaim: census of 2 — Eligible 1, NotTriggered 1" in html


def test_the_timeline_places_windows_rotations_and_now_on_its_span() -> None:
    svg = render.timeline(snapshot()["pools"][0]["timeline"], "2024-01-01T10:05:00+00:00")
    # The span is 04:05-12:05 (8h = 1000 units): 10:00 is at 739.6, now (10:05) at 750.
    assert '<rect class="tl-window" x="739.6" y="2" width="260.4"' in svg
    assert '<rect class="tl-rotation running" x="741.7"' in svg
    assert '<line class="tl-now" x1="750.0"' in svg
    assert render.timeline(None, "2024-01-01T10:05:00+00:00") == ""


def test_everything_from_the_snapshot_is_escaped() -> None:
    evil = "<script>alert(1)</script>"
    snap = snapshot(
        nodes=[node(evil, 1, pool=evil)],
        events=[
            {
                "id": 9,
                "at": "2024-01-01T10:04:00+00:00",
                "kind": evil,
                "subject": evil,
                "namespace": None,
                "level": "info",
                "data": {"message": evil},
            }
        ],
    )
    page = render.page(snap)
    assert "<script>alert" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_claims_show_used_against_limit_and_events_newest_first() -> None:
    snap = snapshot()
    claims = render.claims(snap)
    assert 'data-claim="c-1" data-namespace="ci"' in claims and claims.count('class="bar"') == 3
    events = render.events(snap)
    assert events.index('data-event-id="2"') < events.index('data-event-id="1"')
    assert "node=general-0001 target_node=general-0002" in events
    assert render.claims(snapshot(claims=[])) == '<p class="empty">No claims.</p>'


def test_the_sign_in_page_escapes_its_message() -> None:
    html = render.login("<b>no</b>")
    assert "&lt;b&gt;no&lt;/b&gt;" in html and 'name="token"' in html


def test_a_pool_held_by_the_ledger_gate_names_the_node_the_shortfall_and_the_ways_out() -> None:
    pool = snapshot()["pools"][0]
    held = {"node": "n-1", "placements": 5, "fits": False, "stranded": 2}
    held["missing"] = {"cpus": 8, "memory_mb": 0, "disk_gb": 0}
    gate = {"reason": "ledgerCapacity", "until": None, "ledger": held}
    html = render.pools(snapshot(pools=[{**pool, "active": None, "gate": gate}]))
    assert 'data-why="ledger"' in html and "ledgerCapacity" in html
    assert "node n-1, 2 of 5 placement(s)" in html and "(missing cpus 8)" in html
    assert "add a node" in html
    split = {**gate, "ledger": {**held, "missing": {"cpus": 0}}}
    html = render.pools(snapshot(pools=[{**pool, "active": None, "gate": split}]))
    assert "room split across nodes" in html
