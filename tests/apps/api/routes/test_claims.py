"""Claims over HTTP: the admin writes, the namespace reads; every refusal in the one error shape."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.apps.api.conftest import ADMIN, Api

NS = "team-a"
URL = f"/v1/namespaces/{NS}/claims"
PLACEMENTS = f"/v1/namespaces/{NS}/placements"
CLAIM = {"cpus": 6, "memory_mb": 4096, "disk_gb": 100, "expires_in_seconds": 3600}


async def create(api: Api, **body: Any) -> dict[str, Any]:
    merged = {k: v for k, v in {**CLAIM, **body}.items() if v is not None}
    r = await api.client.post(URL, json=merged, headers=ADMIN)
    assert r.status_code == 201, r.text
    created: dict[str, Any] = r.json()
    return created


async def test_create_is_201_with_the_claim_and_its_location(api: Api) -> None:
    await api.node("hv-1")  # 24 vCPUs
    r = await api.client.post(URL, json=CLAIM, headers=ADMIN)
    assert r.status_code == 201
    body = r.json()
    assert (body["namespace"], body["cpus"], body["memory_mb"], body["disk_gb"]) == (
        NS,
        6,
        4096,
        100,
    )
    assert body["state"] == "active" and body["used"] == {"cpus": 0, "memory_mb": 0, "disk_gb": 0}
    assert r.headers["Location"] == f"{URL}/{body['id']}"
    team = await api.token(NS)
    assert (await api.client.get(r.headers["Location"], headers=team)).json() == body
    assert [c["id"] for c in (await api.client.get(URL, headers=team)).json()] == [body["id"]]


async def test_expires_at_is_an_alternative_to_expires_in_seconds(api: Api) -> None:
    await api.node("hv-1")
    at = api.clock.now() + timedelta(hours=2)
    body = await create(api, expires_in_seconds=None, expires_at=at.isoformat())
    assert body["expires_at"].startswith(at.strftime("%Y-%m-%dT%H:%M:%S"))


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**CLAIM, "cpus": -1}, "cpus"),
        ({**CLAIM, "expires_in_seconds": 0}, "expires_in_seconds"),
        ({**CLAIM, "expires_in_seconds": True}, "expires_in_seconds"),
        ({**CLAIM, "expires_in_seconds": None}, "expires_in_seconds"),
        ({k: v for k, v in CLAIM.items() if k != "expires_in_seconds"}, "expires_in_seconds"),
        ({**CLAIM, "expires_at": "2030-01-01T00:00:00+00:00"}, "expires_at"),
        ({**CLAIM, "expires_in_seconds": 5, "expires_at": None}, "expires_at"),
    ],
)
async def test_invalid_claims_are_422_naming_the_field(
    api: Api, body: dict[str, Any], field: str
) -> None:
    r = await api.client.post(URL, json=body, headers=ADMIN)
    assert r.status_code == 422
    assert field in r.json()["message"]
    assert not r.json()["message"].startswith("Value error")


async def test_an_expiry_in_the_past_is_422(api: Api) -> None:
    past = (api.clock.now() - timedelta(seconds=1)).isoformat()
    body = {k: v for k, v in CLAIM.items() if k != "expires_in_seconds"}
    r = await api.client.post(URL, json={**body, "expires_at": past}, headers=ADMIN)
    assert r.status_code == 422 and r.json()["fields"][0]["field"] == "expires_at"


async def test_a_second_active_claim_is_409_exists(api: Api) -> None:
    await api.node("hv-1")
    await create(api)
    r = await api.client.post(URL, json=CLAIM, headers=ADMIN)
    assert r.status_code == 409 and r.json()["error"] == "exists"


async def test_more_than_the_cluster_can_promise_is_507_with_dimensions(api: Api) -> None:
    await api.node("hv-1", threads=1)  # 3 vCPUs
    r = await api.client.post(URL, json=CLAIM, headers=ADMIN)
    assert r.status_code == 507
    body = r.json()
    assert body["error"] == "insufficient_capacity"
    cpus = next(d for d in body["dimensions"] if d["dimension"] == "cpus")
    assert (cpus["limit"], cpus["requested"], cpus["exceeded"]) == (3, 6, True)


async def test_patch_changes_only_the_fields_given(api: Api) -> None:
    await api.node("hv-1")
    claim = await create(api)
    r = await api.client.patch(f"{URL}/{claim['id']}", json={"cpus": 8}, headers=ADMIN)
    assert r.status_code == 200
    assert (r.json()["cpus"], r.json()["memory_mb"], r.json()["expires_at"]) == (
        8,
        4096,
        claim["expires_at"],
    )
    r = await api.client.patch(
        f"{URL}/{claim['id']}", json={"expires_in_seconds": 60}, headers=ADMIN
    )
    assert r.status_code == 200 and r.json()["cpus"] == 8
    assert r.json()["expires_at"] != claim["expires_at"]


async def test_patch_refusals_below_usage_not_active_and_capacity(api: Api) -> None:
    await api.node("hv-1")  # 24 vCPUs
    claim = await create(api)
    team = await api.token(NS)
    placed = await api.client.post(
        PLACEMENTS, json={"cpus": 4, "memory_mb": 1, "disk_gb": 1}, headers=team
    )
    assert placed.status_code == 201 and placed.json()["claim_id"] == claim["id"]
    path = f"{URL}/{claim['id']}"
    below = await api.client.patch(path, json={"cpus": 3}, headers=ADMIN)
    assert below.status_code == 409 and below.json()["error"] == "below_usage"
    assert any(d["dimension"] == "cpus" for d in below.json()["dimensions"])
    too_big = await api.client.patch(path, json={"cpus": 1000}, headers=ADMIN)
    assert too_big.status_code == 507 and too_big.json()["error"] == "insufficient_capacity"
    api.clock.advance(timedelta(hours=2))  # past expires_at: expired at once, swept or not
    expired = await api.client.patch(path, json={"cpus": 8}, headers=ADMIN)
    assert expired.status_code == 409 and expired.json()["error"] == "not_active"
    assert (await api.client.get(path, headers=team)).json()["state"] == "expired"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "body"),
        ({"cpus": None}, "cpus"),
        ({"expires_in_seconds": 5, "expires_at": "2999-01-01T00:00:00Z"}, "expires_at"),
        ({"limit_cpus": 5}, "limit_cpus"),
    ],
)
async def test_invalid_patches_are_422(api: Api, body: dict[str, Any], field: str) -> None:
    await api.node("hv-1")
    claim = await create(api)
    r = await api.client.patch(f"{URL}/{claim['id']}", json=body, headers=ADMIN)
    assert r.status_code == 422
    assert field in r.json()["message"] or field == "body"


async def test_delete_is_204_then_404_and_usage_returns_to_the_cluster(api: Api) -> None:
    await api.node("hv-1")
    claim = await create(api)
    team = await api.token(NS)
    await api.client.post(PLACEMENTS, json={"cpus": 2, "memory_mb": 1, "disk_gb": 1}, headers=team)
    assert (await api.client.delete(f"{URL}/{claim['id']}", headers=ADMIN)).status_code == 204
    again = await api.client.delete(f"{URL}/{claim['id']}", headers=ADMIN)
    assert again.status_code == 404
    assert again.json() == {"error": "not_found", "message": "claim not found"}
    cluster = (await api.client.get("/v1/admin/resources", headers=ADMIN)).json()["cluster"]
    assert cluster["claimed"]["cpus"] == 0 and cluster["unclaimed_used"]["cpus"] == 2


async def test_the_namespace_token_reads_but_never_writes_its_claims(api: Api) -> None:
    await api.node("hv-1")
    claim = await create(api)
    team = await api.token(NS)
    path = f"{URL}/{claim['id']}"
    assert (await api.client.get(path, headers=team)).status_code == 200
    for method, body in (("POST", CLAIM), ("PATCH", {"cpus": 1}), ("DELETE", None)):
        target = URL if method == "POST" else path
        r = await api.client.request(method, target, json=body, headers=team)
        assert (r.status_code, r.json()["error"]) == (403, "forbidden")


async def test_another_namespaces_claim_is_exactly_a_missing_one(api: Api) -> None:
    await api.node("hv-1")
    claim = await create(api)
    other = await api.token("team-b")
    missing = await api.client.get(
        "/v1/namespaces/team-b/claims/00000000-0000-0000-0000-000000000000", headers=other
    )
    # Asked for in its own namespace: exactly a missing one.
    r = await api.client.get(f"/v1/namespaces/team-b/claims/{claim['id']}", headers=other)
    assert (r.status_code, r.json()) == (404, missing.json())
    assert missing.json() == {"error": "not_found", "message": "claim not found"}
    # Asked for in the claim's namespace: not allowed, as for anything there.
    r = await api.client.get(f"{URL}/{claim['id']}", headers=other)
    assert (r.status_code, r.json()["error"]) == (403, "forbidden")


async def test_advisory_overage_is_admitted_and_reported(api: Api) -> None:
    await api.node("hv-1")
    await create(api, cpus=2)
    team = await api.token(NS)
    r = await api.client.post(
        PLACEMENTS, json={"cpus": 4, "memory_mb": 1, "disk_gb": 1}, headers=team
    )
    assert r.status_code == 201
    assert r.json()["over_claim"] is True
    assert [d["dimension"] for d in r.json()["over_claim_dimensions"]] == ["cpus"]
    again = await api.client.get(f"{PLACEMENTS}/{r.json()['id']}", headers=team)
    assert again.json() == r.json()  # read back from the audit trail


async def test_hard_claims_refuse_overage_with_403_and_the_dimensions(hard_api: Api) -> None:
    await hard_api.node("hv-1")
    r = await hard_api.client.post(URL, json={**CLAIM, "cpus": 2}, headers=ADMIN)
    assert r.status_code == 201
    team = await hard_api.token(NS)
    refused = await hard_api.client.post(
        PLACEMENTS, json={"cpus": 4, "memory_mb": 1, "disk_gb": 1}, headers=team
    )
    assert refused.status_code == 403
    body = refused.json()
    assert body["error"] == "claim_exceeded"
    assert [(d["dimension"], d["limit"], d["requested"]) for d in body["dimensions"]] == [
        ("cpus", 2, 4)
    ]
