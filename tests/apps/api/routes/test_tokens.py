"""Namespace tokens: the secret is shown once and stored only as a digest; revoke, list."""

from __future__ import annotations

import json
import logging

import pytest
import sqlalchemy as sa
from structlog.testing import capture_logs

from fleetgate.adapters.sql.schema import api_tokens
from fleetgate.domain.tokens import digest
from tests.apps.api.conftest import ADMIN, Api, bearer

URL = "/v1/admin/namespaces/team-a/tokens"


async def test_create_returns_the_secret_once_and_stores_only_its_digest(api: Api) -> None:
    r = await api.client.post(URL, headers=ADMIN)
    assert r.status_code == 201
    created = r.json()
    assert created["namespace"] == "team-a" and created["active"] is True
    secret = created["secret"]
    listed = (await api.client.get(URL, headers=ADMIN)).json()
    assert [t["id"] for t in listed] == [created["id"]]
    assert "secret" not in listed[0]
    async with api.container.ledger().store.engine.connect() as conn:
        stored = (await conn.execute(sa.select(api_tokens.c.token_hash))).scalars().all()
    assert stored == [digest(secret)] and secret not in stored
    # The secret works for its namespace.
    own = await api.client.get("/v1/namespaces/team-a/placements", headers=bearer(secret))
    assert own.status_code == 200


async def test_revoke_is_204_then_404_and_the_token_stops_working(api: Api) -> None:
    created = (await api.client.post(URL, headers=ADMIN)).json()
    assert (await api.client.delete(f"{URL}/{created['id']}", headers=ADMIN)).status_code == 204
    again = await api.client.delete(f"{URL}/{created['id']}", headers=ADMIN)
    assert again.status_code == 404
    assert again.json() == {"error": "not_found", "message": "token not found"}
    listed = (await api.client.get(URL, headers=ADMIN)).json()
    assert listed[0]["active"] is False and listed[0]["revoked_at"] is not None
    r = await api.client.get("/v1/namespaces/team-a/placements", headers=bearer(created["secret"]))
    assert r.status_code == 401


async def test_a_token_cannot_be_revoked_through_another_namespace(api: Api) -> None:
    created = (await api.client.post(URL, headers=ADMIN)).json()
    r = await api.client.delete(
        f"/v1/admin/namespaces/team-b/tokens/{created['id']}", headers=ADMIN
    )
    assert r.status_code == 404
    assert (await api.client.get(URL, headers=ADMIN)).json()[0]["active"] is True


async def test_namespace_tokens_may_not_manage_tokens(api: Api) -> None:
    team = await api.token("team-a")
    assert (await api.client.post(URL, headers=team)).status_code == 403
    assert (await api.client.get(URL, headers=team)).status_code == 403
    other = await api.client.get("/v1/admin/namespaces/team-b/tokens", headers=team)
    assert (other.status_code, other.json()["message"]) == (
        403,
        "not allowed: this token acts only in namespace team-a",
    )


async def test_create_and_revoke_are_each_recorded_once_with_their_request_id(api: Api) -> None:
    """One event per write, in the write's transaction, naming the token by id only; a revoke
    that finds no active token (404) records none (issue 34)."""
    r = await api.client.post(URL, headers={**ADMIN, "X-Request-ID": "create-1"})
    token_id = r.json()["id"]
    for trace, expected in (("revoke-1", 204), ("revoke-2", 404)):
        headers = {**ADMIN, "X-Request-ID": trace}
        assert (await api.client.delete(f"{URL}/{token_id}", headers=headers)).status_code == (
            expected
        )
    events = (await api.client.get("/v1/events", headers=ADMIN)).json()
    assert [(e["kind"], e["subject"], e["namespace"], e["data"]) for e in events] == [
        ("token created", token_id, "team-a", {"token": token_id, "request_id": "create-1"}),
        ("token revoked", token_id, "team-a", {"token": token_id, "request_id": "revoke-1"}),
    ]


async def test_no_event_or_log_line_carries_a_secret_or_its_digest(
    api: Api, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    # The level every fleetgate process logs at (apps.logging); below it, drivers' debug lines
    # echo statement parameters, which no fleetgate process turns on.
    caplog.set_level(logging.INFO)
    with capture_logs() as lines:
        created = (await api.client.post(URL, headers=ADMIN)).json()
        assert (await api.client.delete(f"{URL}/{created['id']}", headers=ADMIN)).status_code == 204
    secret = created["secret"]
    events = (await api.client.get("/v1/events", headers=ADMIN)).json()
    assert [e["kind"] for e in events] == ["token created", "token revoked"]
    logged = [str(line) for line in lines] + [r.getMessage() for r in caplog.records]
    assert any("token created" in line for line in logged)  # the log was captured
    out, err = capfd.readouterr()
    for text in (json.dumps(events), *logged, caplog.text, out, err):
        assert secret not in text
        assert digest(secret) not in text
