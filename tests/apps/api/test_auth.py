"""Bearer authentication and the order of answers: 401, then 403 (another namespace), then 403,
and only then 422 — whatever the body holds."""

from __future__ import annotations

import pytest
from fastapi import APIRouter

from fleetgate.apps.api.auth import (
    Authenticator,
    GuardedRoute,
    Principal,
    bearer_token,
    new_secret,
)
from fleetgate.apps.api.errors import ApiError
from fleetgate.domain import tokens
from tests.apps.api.conftest import ADMIN, ADMIN_TOKEN, Api, bearer
from tests.ledgers import START


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc", "abc"),
        ("bearer abc", "abc"),
        ("BEARER  abc ", "abc"),
        (None, None),
        ("", None),
        ("Basic abc", None),
        ("Bearer", None),
        ("Bearer ", None),
        ("Bearer " + "x" * 513, None),
    ],
)
def test_bearer_token_parsing(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token


def test_new_secrets_are_prefixed_long_and_distinct() -> None:
    a, b = new_secret(), new_secret()
    assert a.startswith(tokens.SECRET_PREFIX) and len(a) >= 40 and a != b


def test_a_route_without_an_access_rule_cannot_be_declared() -> None:
    router = APIRouter(route_class=GuardedRoute)

    async def unguarded() -> None:
        return None

    with pytest.raises(TypeError, match="access rule"):
        router.get("/x")(unguarded)


def test_principal_sees_only_its_namespace() -> None:
    assert Principal(admin=True).may_see("anything")
    team = Principal(admin=False, namespace="team-a")
    assert team.may_see("team-a") and not team.may_see("team-b")


async def test_the_authenticator_knows_admin_namespace_revoked_and_unknown(api: Api) -> None:
    store = api.container.token_store()
    auth = Authenticator(ADMIN_TOKEN, store)
    assert (await auth.authenticate(f"Bearer {ADMIN_TOKEN}")).admin
    secret = new_secret()
    token = await store.create_token("team-a", tokens.digest(secret), START)
    principal = await auth.authenticate(f"Bearer {secret}")
    assert principal == Principal(admin=False, namespace="team-a", token_id=token.id)
    await store.revoke_token("team-a", token.id, START)
    for header in (f"Bearer {secret}", "Bearer fgt_unknown", None, f"Bearer {ADMIN_TOKEN}x"):
        with pytest.raises(ApiError) as caught:
            await auth.authenticate(header)
        assert caught.value.status == 401


async def test_without_an_admin_token_configured_no_token_is_admin(api: Api) -> None:
    auth = Authenticator(None, api.container.token_store())
    for header in ("Bearer ", "Bearer None", "Bearer null"):
        with pytest.raises(ApiError):
            await auth.authenticate(header)


async def test_401_carries_www_authenticate_and_the_error_shape(api: Api) -> None:
    for headers in ({}, bearer("wrong"), {"Authorization": "Basic Zm9vOmJhcg=="}):
        r = await api.client.get("/v1/nodes", headers=headers)
        assert r.status_code == 401
        assert r.headers["WWW-Authenticate"] == "Bearer"
        body = r.json()
        assert body["error"] == "unauthorized" and list(body) == ["error", "message"]
        # Which of the two it was, and how to pass a token (issue 42).
        sent = (
            "the one sent is not known here or was revoked"
            if headers == bearer("wrong")
            else "none was sent"
        )
        assert body["message"] == (
            f"a valid bearer token is required: {sent} "
            "(the fleetgate CLI sends the one given with --token or FLEETGATE_TOKEN)"
        ), body


async def test_a_bad_token_wins_over_a_malformed_body(api: Api) -> None:
    r = await api.client.put(
        "/v1/nodes/n1", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 401


async def test_another_namespace_is_403_before_the_body_is_read(api: Api) -> None:
    team_a = await api.token("team-a")
    # The same answer for a namespace that holds something and for one that holds nothing:
    # true ("not allowed", never "not found") and telling a stranger nothing (issue 42).
    await api.node("hv-1")
    await api.client.post(
        "/v1/namespaces/team-b/placements",
        json={"cpus": 1, "memory_mb": 1, "disk_gb": 1},
        headers=ADMIN,
    )
    for other in ("team-b", "no-such-team"):
        r = await api.client.post(
            f"/v1/namespaces/{other}/placements",
            content=b"{not json",
            headers={**team_a, "Content-Type": "application/json"},
        )
        assert r.status_code == 403
        assert r.json() == {
            "error": "forbidden",
            "message": "not allowed: this token acts only in namespace team-a",
        }


async def test_a_namespace_token_on_an_admin_route_is_403_before_the_body(api: Api) -> None:
    team_a = await api.token("team-a")
    r = await api.client.put(
        "/v1/nodes/n1", content=b"[]", headers={**team_a, "Content-Type": "application/json"}
    )
    assert r.status_code == 403
    assert r.json()["error"] == "forbidden"


async def test_a_revoked_token_stops_working_at_once(api: Api) -> None:
    team_a = await api.token("team-a")
    assert (
        await api.client.get("/v1/namespaces/team-a/placements", headers=team_a)
    ).status_code == 200
    listed = (await api.client.get("/v1/admin/namespaces/team-a/tokens", headers=ADMIN)).json()
    r = await api.client.delete(
        f"/v1/admin/namespaces/team-a/tokens/{listed[0]['id']}", headers=ADMIN
    )
    assert r.status_code == 204
    assert (
        await api.client.get("/v1/namespaces/team-a/placements", headers=team_a)
    ).status_code == 401
