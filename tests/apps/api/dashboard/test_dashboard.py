"""The dashboard's routes: the admin token is required, taken once from the link into a cookie."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from fleetgate.apps.api.dashboard import COOKIE, install_dashboard, render
from fleetgate.apps.container import Container
from tests.apps.api.dashboard.sample import snapshot

TOKEN = "dashboard-admin-token-0123"


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async def source() -> dict[str, Any]:
        return snapshot()

    app = FastAPI()
    install_dashboard(app, source, TOKEN)
    app.state.container = Container()  # the What-if page's simulator
    app.state.simulate_seconds = math.inf  # what-if runs: no wall-clock bound in tests
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
        yield c


async def test_without_the_token_there_is_only_a_sign_in_form(client: httpx.AsyncClient) -> None:
    r = await client.get("/")
    assert r.status_code == 401 and 'name="token"' in r.text
    assert "general-0001" not in r.text
    r = await client.get("/dashboard/data")
    assert r.status_code == 401 and r.json()["error"] == "unauthorized"


async def test_a_wrong_token_is_refused_and_sets_nothing(client: httpx.AsyncClient) -> None:
    r = await client.get("/", params={"token": "guess"})
    assert r.status_code == 401 and COOKIE not in r.cookies
    assert "not the admin token" in r.text


async def test_the_link_token_opens_a_session_and_leaves_the_address_bar(
    client: httpx.AsyncClient,
) -> None:
    r = await client.get("/", params={"token": TOKEN})
    assert r.status_code == 303 and r.headers["location"] == "/"
    cookie = r.headers["set-cookie"]
    assert TOKEN not in cookie  # an opaque session id, never the admin token itself
    assert len(r.cookies[COOKIE]) >= 40
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    assert "Max-Age=" in cookie  # the session expires
    page = await client.get("/")  # the client keeps the cookie
    assert page.status_code == 200 and 'data-node="general-0001"' in page.text
    data = await client.get("/dashboard/data")
    assert data.status_code == 200
    body = data.json()
    assert body["data"]["nodes"][0]["name"] == "general-0001"
    assert set(body["html"]) == set(render.SECTIONS)


async def test_the_raw_token_as_a_cookie_is_not_a_session(client: httpx.AsyncClient) -> None:
    client.cookies.set(COOKIE, TOKEN)
    assert (await client.get("/")).status_code == 401
    assert (await client.get("/dashboard/data")).status_code == 401


async def test_a_forged_session_id_is_refused(client: httpx.AsyncClient) -> None:
    client.cookies.set(COOKIE, "x" * 43)
    assert (await client.get("/dashboard/data")).status_code == 401


async def test_signing_out_ends_the_session_on_the_server(client: httpx.AsyncClient) -> None:
    await client.get("/", params={"token": TOKEN})
    session_id = client.cookies[COOKIE]
    r = await client.post("/dashboard/signout")
    assert r.status_code == 303
    client.cookies.set(COOKIE, session_id)  # a copy of the cookie kept by an attacker
    assert (await client.get("/dashboard/data")).status_code == 401


async def test_a_session_dies_with_the_admin_token_it_was_opened_with() -> None:
    async def source() -> dict[str, Any]:
        return snapshot()

    app = FastAPI()
    dashboard = install_dashboard(app, source, TOKEN)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
        await c.get("/", params={"token": TOKEN})
        assert (await c.get("/dashboard/data")).status_code == 200
        dashboard.admin_token = "a-rotated-admin-token-4567"
        assert (await c.get("/dashboard/data")).status_code == 401


async def test_a_bearer_admin_token_reads_the_data_too(client: httpx.AsyncClient) -> None:
    r = await client.get("/dashboard/data", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200
    r = await client.get("/dashboard/data", headers={"Authorization": "Bearer nope"})
    assert r.status_code == 401


async def test_pages_forbid_inline_script_framing_caching_and_referrers(
    client: httpx.AsyncClient,
) -> None:
    await client.get("/", params={"token": TOKEN})
    for path in ("/", "/dashboard/data", "/whatif"):
        r = await client.get(path)
        assert r.status_code == 200
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert r.headers["cache-control"] == "no-store"
        assert r.headers["referrer-policy"] == "no-referrer"
        assert r.headers["x-frame-options"] == "DENY"
    assert "<script>" not in (await client.get("/")).text  # no inline script to allow


async def test_the_dashboard_links_to_the_what_if_page(client: httpx.AsyncClient) -> None:
    await client.get("/", params={"token": TOKEN})
    page = (await client.get("/")).text
    assert 'href="/whatif"' in page
    assert 'href="/"' in (await client.get("/whatif")).text  # and back


async def test_the_static_files_are_served(client: httpx.AsyncClient) -> None:
    js = await client.get("/dashboard/static/dashboard.js")
    assert js.status_code == 200 and "/dashboard/data" in js.text
    css = await client.get("/dashboard/static/dashboard.css")
    assert css.status_code == 200 and ".bar" in css.text
    assert (await client.get("/dashboard/static/../__init__.py")).status_code == 404


async def test_without_a_configured_admin_token_nobody_gets_in() -> None:
    app = FastAPI()

    async def source() -> dict[str, Any]:
        return snapshot()

    install_dashboard(app, source, None)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://x") as c:
        assert (await c.get("/", params={"token": ""})).status_code == 401
        assert (await c.get("/dashboard/data")).status_code == 401
