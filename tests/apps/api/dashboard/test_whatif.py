"""The What-if page's routes: guarded like the dashboard; two policies checked and simulated."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from fleetgate.apps.api.dashboard.whatif import DEFAULT_FLEET, POLICY_A, POLICY_B, page
from fleetgate.apps.api.dashboard.whatif_run import plan
from tests.apps.api.dashboard.test_dashboard import TOKEN, client

__all__ = ["client"]  # the dashboard's fixture, imported so that pytest finds it here
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BODY = {
    "policies": [POLICY_A, POLICY_B],
    "count": 12,
    "spread": "5d",
    "expireAfter": "14d",
    "terminationGracePeriod": "1h",
    "span": "21d",
}


def lines(r: httpx.Response) -> list[dict[str, Any]]:
    """The streamed answer's JSON lines."""
    assert r.headers["content-type"] == "application/x-ndjson"
    return [json.loads(line) for line in r.text.splitlines() if line]


def answer(r: httpx.Response) -> dict[str, Any]:
    """The streamed answer's last line: the sides and their HTML (or an error)."""
    assert r.status_code == 200, r.text
    return lines(r)[-1]


async def test_the_page_and_its_answers_need_the_admin_token(client: httpx.AsyncClient) -> None:
    assert (await client.get("/whatif")).status_code == 401
    assert (await client.post("/dashboard/whatif", json=BODY)).status_code == 401
    page = await client.get("/whatif", headers=AUTH)
    assert page.status_code == 200 and "policy-a" in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]


async def test_a_direct_link_with_the_token_signs_in_and_lands_on_the_what_if_page(
    client: httpx.AsyncClient,
) -> None:
    r = await client.get("/whatif", params={"token": TOKEN})
    assert r.status_code == 303 and r.headers["location"] == "/whatif"
    assert TOKEN not in r.headers["set-cookie"]
    page = await client.get("/whatif")
    assert page.status_code == 200 and "policy-a" in page.text
    assert (await client.get("/dashboard/data")).status_code == 200  # one session for both


async def test_a_wrong_token_on_the_what_if_link_asks_again_for_that_page(
    client: httpx.AsyncClient,
) -> None:
    r = await client.get("/whatif", params={"token": "guess"})
    assert r.status_code == 401 and 'action="/whatif"' in r.text
    assert "set-cookie" not in r.headers


async def test_two_policies_are_checked_and_simulated_side_by_side(
    client: httpx.AsyncClient,
) -> None:
    r = await client.post("/dashboard/whatif", json=BODY, headers=AUTH)
    a, b = answer(r)["sides"]
    assert (a["name"], b["name"]) == ("daily", "weekly")
    # Daily windows keep up with 12 nodes; one window a week cannot give K=2 chances (the
    # forecast's fatal finding), so nothing rotates and the simulation shows the breaches.
    assert a["check"]["findings"] == [] and a["simulation"]["summary"]["breaches"] == 0
    assert a["simulation"]["summary"]["rotations"] > 0
    assert [f["code"] for f in b["check"]["findings"]] == ["ANonPositive"]
    assert b["simulation"]["summary"]["breaches"] > 0
    html = answer(r)["html"]
    assert html.count("<article class='whatif panel'") == 2 and "tl-rotation" in html


async def test_each_simulated_day_reached_is_reported_before_the_answer(
    client: httpx.AsyncClient,
) -> None:
    r = await client.post("/dashboard/whatif", json=BODY, headers=AUTH)
    *progress, last = lines(r)
    assert "sides" in last
    reached = [(item["progress"]["side"], item["progress"]["day"]) for item in progress]
    assert {item["progress"]["days"] for item in progress} == {21}  # the span
    # Side A, then B, each from day 0 to the span's end, each day once; quiet days the run
    # jumps over (B rotates nothing) are not reported.
    assert reached == sorted(set(reached))
    for side in "AB":
        days = [day for s, day in reached if s == side]
        assert days[0] == 0 and days[-1] == 21
    assert len([day for s, day in reached if s == "A"]) == 22  # A rotates every day


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"count": 0}, "count"),
        ({"count": 50_000}, "count"),
        ({"span": "400d"}, "span"),
        ({"expireAfter": "soon"}, "fleet.expireAfter"),
        ({"spread": 5}, "fleet.generate.spread"),
        ({"policies": ["kind: nothing"]}, "policy A"),
        ({"policies": []}, "policies"),
    ],
)
async def test_bad_input_is_a_422_naming_the_field(
    client: httpx.AsyncClient, change: dict[str, Any], field: str
) -> None:
    r = await client.post("/dashboard/whatif", json={**BODY, **change}, headers=AUTH)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field


async def test_the_default_pair_shows_a_healthy_a_against_a_breaching_b(
    client: httpx.AsyncClient,
) -> None:
    form = page()
    for value in DEFAULT_FLEET.values():
        assert f'value="{value}"' in form  # the form starts with exactly this fleet
    body = {"policies": [POLICY_A, POLICY_B], **DEFAULT_FLEET}
    r = await client.post("/dashboard/whatif", json=body, headers=AUTH)
    a, b = answer(r)["sides"]
    assert a["check"]["findings"] == [], a["check"]["findings"]
    assert a["simulation"]["summary"]["breaches"] == 0
    assert a["simulation"]["summary"]["rotations"] >= DEFAULT_FLEET["count"]
    assert b["simulation"]["summary"]["breaches"] > 0


async def test_the_timelines_have_the_dashboards_axis_dates_and_legend(
    client: httpx.AsyncClient,
) -> None:
    r = await client.post("/dashboard/whatif", json=BODY, headers=AUTH)
    html = answer(r)["html"]
    assert html.count('<svg class="tl-axis"') == 2  # an hour/day axis under each timeline
    assert "Mon 01 Jan 2024" in html  # the span's dates, in the policy's zone
    assert "simulated times in Asia/Tokyo" in html
    assert html.count("<figcaption>") == 2 and "maintenance window (top row)" in html
    assert "forced expiry" in html  # B's breach lines are in its legend
    assert 'class="tl-now"' not in html  # a simulation has no "now"


async def test_a_policy_selecting_by_expressions_only_governs_the_generated_fleet(
    client: httpx.AsyncClient,
) -> None:
    # The fleet is given the labels the selector needs (an In takes its first value), as
    # `fleetgate up`'s sample pools are: it used to get matchLabels only, and was refused.
    selector = 'matchLabels: {fleetgate.io/rotate: "true"}'
    assert selector in POLICY_A
    by_expression = POLICY_A.replace(
        selector, "matchExpressions: [{key: tier, operator: In, values: [gold, silver]}]"
    )
    r = await client.post(
        "/dashboard/whatif", json={**BODY, "policies": [by_expression]}, headers=AUTH
    )
    (side,) = answer(r)["sides"]
    assert side["simulation"]["summary"]["rotations"] > 0


# A ledger on the generated fleet: 3 nodes of 8 CPUs, aged so node-1 falls due within the span,
# while the pool launches 4-CPU nodes: a drained node's placements need room on the others.
HELD = {
    **BODY,
    "policies": [POLICY_A],
    "count": 3,
    "spread": "13d",
    "span": "7d",
    "ledger": {"fill": 100, "nodeCpu": 8, "launchCpu": 4, "gate": True},
}


async def test_a_full_ledger_holds_a_node_to_its_expiry_and_the_page_says_so(
    client: httpx.AsyncClient,
) -> None:
    """Full nodes and a smaller surge: the gate holds node-1 until Karpenter force-expires it,
    the simulator's CapacityHoldMeetsExpiry (as ``fleetgate simulate`` gives it), shown."""
    r = await client.post("/dashboard/whatif", json=HELD, headers=AUTH)
    (side,) = answer(r)["sides"]
    found = [d for d in side["simulation"]["diagnostics"] if d["code"] == "CapacityHoldMeetsExpiry"]
    assert [d["message"].split()[1].rstrip(",") for d in found] == ["node-1"]
    assert found[0]["severity"] == "warning"
    assert "forced expiry at 2024-01-06" in found[0]["message"]
    assert side["simulation"]["ledger"]["placements"] == 3 * 24
    html = answer(r)["html"]
    assert "class='finding warn' data-code='CapacityHoldMeetsExpiry'" in html
    assert "node node-1, held for capacity" in html


async def test_a_low_fill_leaves_room_and_gives_no_hold(client: httpx.AsyncClient) -> None:
    body = {**HELD, "ledger": {**HELD["ledger"], "fill": 25}}
    (side,) = answer(await client.post("/dashboard/whatif", json=body, headers=AUTH))["sides"]
    codes = [d["code"] for d in side["simulation"]["diagnostics"]]
    assert "CapacityHoldMeetsExpiry" not in codes
    assert side["simulation"]["ledger"]["relocated"] > 0  # placements moved: the ledger ran


async def test_without_a_ledger_the_run_has_no_ledger_part(client: httpx.AsyncClient) -> None:
    body = {**HELD, "ledger": None}
    (side,) = answer(await client.post("/dashboard/whatif", json=body, headers=AUTH))["sides"]
    assert "ledger" not in side["simulation"]


@pytest.mark.parametrize(
    ("ledger", "field"),
    [
        ({"fill": 101}, "ledger.fill"),
        ({"fill": "90"}, "ledger.fill"),
        ({"fill": None}, "ledger.fill"),
        ({"fill": 50, "nodeCpu": 0}, "ledger.nodeCpu"),
        ({"fill": 50, "launchCpu": 65}, "ledger.launchCpu"),
        ({"fill": 50, "gate": "on"}, "ledger.gate"),
        ({"fill": 50, "cpu": 4}, "ledger.cpu"),
        ("full", "ledger"),
    ],
)
async def test_a_bad_ledger_input_is_a_422_naming_the_field(
    client: httpx.AsyncClient, ledger: Any, field: str
) -> None:
    r = await client.post("/dashboard/whatif", json={**HELD, "ledger": ledger}, headers=AUTH)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field


async def test_a_ledger_past_the_pages_placement_bound_is_refused_naming_the_fill(
    client: httpx.AsyncClient,
) -> None:
    """10 nodes of 64 CPUs filled are 1,920 placements, within the bound; 11 are 2,112."""
    full = {"fill": 100, "nodeCpu": 64, "launchCpu": 4}
    (checked,) = plan({**HELD, "count": 10, "ledger": full})
    ledger = checked.inputs.fleet.ledger
    assert ledger is not None and sum(b.count for (b,) in ledger.placements.values()) == 1920
    body = {**HELD, "count": 11, "ledger": full}
    r = await client.post("/dashboard/whatif", json=body, headers=AUTH)
    assert r.status_code == 422 and r.json()["field"] == "ledger.fill"
    assert "2112 placements" in r.json()["message"]
