"""The What-if page's routes: guarded like the dashboard; two policies checked and simulated."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from fleetgate.apps.api.dashboard import install_dashboard
from fleetgate.apps.api.dashboard.whatif import POLICY_A, POLICY_B
from tests.apps.api.dashboard.sample import snapshot

TOKEN = "dashboard-admin-token-0123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BODY = {
    "policies": [POLICY_A, POLICY_B],
    "count": 12,
    "spread": "5d",
    "expireAfter": "14d",
    "terminationGracePeriod": "1h",
    "span": "21d",
}


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async def source() -> dict[str, Any]:
        return snapshot()

    app = FastAPI()
    install_dashboard(app, source, TOKEN)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
        yield c


async def test_the_page_and_its_answers_need_the_admin_token(client: httpx.AsyncClient) -> None:
    assert (await client.get("/whatif")).status_code == 401
    assert (await client.post("/dashboard/whatif", json=BODY)).status_code == 401
    page = await client.get("/whatif", headers=AUTH)
    assert page.status_code == 200 and "policy-a" in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]


async def test_two_policies_are_checked_and_simulated_side_by_side(
    client: httpx.AsyncClient,
) -> None:
    r = await client.post("/dashboard/whatif", json=BODY, headers=AUTH)
    assert r.status_code == 200, r.text
    a, b = r.json()["sides"]
    assert (a["name"], b["name"]) == ("twice-weekly", "weekly")
    # Twice a week keeps up with 12 nodes; one window a week cannot give K=2 chances (the
    # forecast's fatal finding), so nothing rotates and the simulation shows the breaches.
    assert a["check"]["findings"] == [] and a["simulation"]["summary"]["breaches"] == 0
    assert a["simulation"]["summary"]["rotations"] > 0
    assert [f["code"] for f in b["check"]["findings"]] == ["ANonPositive"]
    assert b["simulation"]["summary"]["breaches"] > 0
    html = r.json()["html"]
    assert html.count("<article class='whatif panel'") == 2 and "tl-rotation" in html


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"count": 0}, "count"),
        ({"count": 50_000}, "count"),
        ({"span": "400d"}, "span"),
        ({"expireAfter": "soon"}, "expireAfter"),
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
