"""``POST …/placements?dry_run=true``: the node a placement would land on, and every refusal,
with the real request's body shapes, changing nothing on any backend."""

from __future__ import annotations

from typing import Any

import httpx

from tests.apps.api.conftest import ADMIN, Api

NS = "team-a"
URL = f"/v1/namespaces/{NS}/placements"
DRY = f"{URL}?dry_run=true"
SMALL = {"cpus": 2, "memory_mb": 1024, "disk_gb": 10}


async def everything(api: Api) -> dict[str, Any]:
    """Every figure a placement can change: nodes, cluster sums, placements, claims, events."""
    get = api.client.get
    return {
        "nodes": (await get("/v1/nodes", headers=ADMIN)).json(),
        "resources": (await get("/v1/admin/resources", headers=ADMIN)).json(),
        "placements": (await get(URL, headers=ADMIN)).json(),
        "claims": (await get(f"/v1/namespaces/{NS}/claims", headers=ADMIN)).json(),
        "events": (await get("/v1/events?limit=1000", headers=ADMIN)).json(),
    }


async def test_a_dry_run_names_the_node_and_changes_nothing(api: Api) -> None:
    await api.node("hv-1", threads=4)
    await api.node("hv-2", threads=8)
    team = await api.token(NS)
    assert (await api.client.post(URL, json=SMALL, headers=team)).status_code == 201
    before = await everything(api)
    r = await api.client.post(DRY, json={**SMALL, "node": "hv-2"}, headers=team)
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["dry_run"], body["node"], body["namespace"]) == (True, "hv-2", NS)
    assert (body["cpus"], body["demand_waived"], body["over_claim"]) == (2, False, False)
    assert "id" not in body
    unforced = await api.client.post(DRY, json=SMALL, headers=team)
    assert unforced.status_code == 200 and unforced.json()["node"] in {"hv-1", "hv-2"}
    assert await everything(api) == before
    # The real request admits where the dry run said.
    real = await api.client.post(URL, json={**SMALL, "node": "hv-2"}, headers=team)
    assert (real.status_code, real.json()["node"]) == (201, "hv-2")


async def test_a_dry_run_refusal_has_the_real_body_without_an_audit_subject(api: Api) -> None:
    await api.node("hv-1", threads=4)
    await api.node("hv-2", threads=4)
    await api.client.post("/v1/nodes/hv-2/cordon", headers=ADMIN)
    team = await api.token(NS)
    too_big = {**SMALL, "disk_gb": 600, "node": "hv-1"}  # the cluster has room, hv-1 not
    before = await everything(api)
    dry = await api.client.post(DRY, json=too_big, headers=team)
    assert await everything(api) == before
    real = await api.client.post(URL, json=too_big, headers=team)
    assert (dry.status_code, real.status_code) == (507, 507)
    dry_body, real_body = dry.json(), real.json()
    assert dry_body.pop("dry_run") is True and "audit_subject" not in dry_body
    real_body.pop("audit_subject")
    assert dry_body == real_body
    assert dry_body["candidates"][0]["stage"] == "node"


async def test_a_dry_run_agrees_with_the_real_admission_request_after_request(api: Api) -> None:
    # Fill one node placement by placement: before each real request the dry run says what it
    # will do, through the admit-until-full edge, the waiver of a loaded node and the cordon.
    await api.node("hv-1", threads=4)
    team = await api.token(NS)
    loaded = {"cpu_load_1": 50.0, "cpu_schedulable": 4}
    seen = set()
    for step in range(7):
        if step == 3:
            await api.client.put("/v1/nodes/hv-1/metrics", json=loaded, headers=ADMIN)
        if step == 6:
            await api.client.post("/v1/nodes/hv-1/cordon", headers=ADMIN)
        dry = await api.client.post(DRY, json=SMALL, headers=team)
        real = await api.client.post(URL, json=SMALL, headers=team)
        assert (dry.status_code, real.status_code) in ((200, 201), (507, 507)), step
        seen.add((real.status_code, real.status_code == 201 and real.json()["demand_waived"]))
        if real.status_code == 201:
            assert dry.json()["node"] == real.json()["node"]
            assert dry.json()["demand_waived"] == real.json()["demand_waived"], step
        else:
            dry_body, real_body = dry.json(), real.json()
            dry_body.pop("dry_run"), real_body.pop("audit_subject")
            assert dry_body == real_body, step
    # Every kind of answer came up: admitted, admitted with the demand clause waived, refused.
    assert seen == {(201, False), (201, True), (507, False)}


async def dry_then_real_under_a_small_claim(api: Api) -> tuple[httpx.Response, httpx.Response]:
    """Under a claim smaller than SMALL: a dry run (that changes nothing), then the real one."""
    await api.node("hv-1")
    claim = {"cpus": 1, "memory_mb": 512, "disk_gb": 5, "expires_in_seconds": 3600}
    made = await api.client.post(f"/v1/namespaces/{NS}/claims", json=claim, headers=ADMIN)
    assert made.status_code == 201, made.text
    team = await api.token(NS)
    before = await everything(api)
    dry = await api.client.post(DRY, json=SMALL, headers=team)
    assert await everything(api) == before
    return dry, await api.client.post(URL, json=SMALL, headers=team)


async def test_a_dry_run_reports_an_advisory_claims_overage(api: Api) -> None:
    dry, real = await dry_then_real_under_a_small_claim(api)
    assert dry.json()["over_claim"] is True
    assert dry.json()["over_claim_dimensions"] == real.json()["over_claim_dimensions"]


async def test_a_hard_claim_refuses_a_dry_run_with_the_real_403(hard_api: Api) -> None:
    dry, real = await dry_then_real_under_a_small_claim(hard_api)
    assert (dry.status_code, real.status_code) == (403, 403)
    dry_body, real_body = dry.json(), real.json()
    dry_body.pop("dry_run"), real_body.pop("audit_subject")
    assert dry_body == real_body


async def test_a_dry_run_of_a_used_request_id_answers_with_that_placement(api: Api) -> None:
    await api.node("hv-1")
    team = await api.token(NS)
    first = await api.client.post(URL, json={**SMALL, "request_id": "job-1"}, headers=team)
    before = await everything(api)
    dry = await api.client.post(DRY, json={**SMALL, "request_id": "job-1"}, headers=team)
    assert await everything(api) == before
    assert (dry.json()["replayed"], dry.json()["node"]) == (True, first.json()["node"])


async def test_a_dry_run_checks_its_input_like_a_real_request(sqlite_api: Api) -> None:
    api = sqlite_api
    team = await api.token(NS)
    r = await api.client.post(DRY, json={**SMALL, "cpus": -1}, headers=team)
    assert r.status_code == 422 and "cpus" in r.text
    r = await api.client.post(f"{URL}?dry_run=maybe", json=SMALL, headers=team)
    assert r.status_code == 422 and "dry_run" in r.text
