"""Placements over HTTP: 201, 507 with per-candidate detail, idempotent replays, release once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.apps.api.conftest import ADMIN, Api

NS = "team-a"
URL = f"/v1/namespaces/{NS}/placements"
SMALL = {"cpus": 2, "memory_mb": 1024, "disk_gb": 10}


async def node_used(api: Api, name: str) -> dict[str, Any]:
    used: dict[str, Any] = (await api.client.get(f"/v1/nodes/{name}", headers=ADMIN)).json()["used"]
    return used


async def test_an_admitted_placement_is_201_with_its_body_and_location(api: Api) -> None:
    await api.node("hv-1")
    team = await api.token(NS)
    r = await api.client.post(URL, json=SMALL, headers=team)
    assert r.status_code == 201
    body = r.json()
    assert {k: body[k] for k in ("namespace", "node", "cpus", "memory_mb", "disk_gb")} == {
        "namespace": NS,
        "node": "hv-1",
        **SMALL,
    }
    assert (body["demand_waived"], body["over_claim"], body["claim_id"]) == (False, False, None)
    assert r.headers["Location"] == f"{URL}/{body['id']}"
    assert "Idempotent-Replayed" not in r.headers
    assert (await api.client.get(r.headers["Location"], headers=team)).json() == body


async def test_a_repeated_request_id_returns_the_first_result_and_admits_nothing(api: Api) -> None:
    await api.node("hv-1")
    team = await api.token(NS)
    first = await api.client.post(URL, json={**SMALL, "request_id": "job-42"}, headers=team)
    again = await api.client.post(URL, json={**SMALL, "request_id": "job-42"}, headers=team)
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.json() == first.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    assert len((await api.client.get(URL, headers=team)).json()) == 1
    assert await node_used(api, "hv-1") == SMALL
    # The key is per namespace: another namespace's identical key is its own placement.
    other = await api.client.post(
        "/v1/namespaces/team-b/placements", json={**SMALL, "request_id": "job-42"}, headers=ADMIN
    )
    assert other.status_code == 201 and other.json()["id"] != first.json()["id"]


@pytest.mark.parametrize(
    ("changed", "fields"),
    [
        ({"cpus": 3}, ["cpus"]),
        ({"memory_mb": 2048, "disk_gb": 11}, ["memory_mb", "disk_gb"]),
        ({"node": "hv-2"}, ["node"]),
    ],
)
async def test_a_reused_request_id_with_another_body_is_409_naming_what_differs(
    api: Api, changed: dict[str, Any], fields: list[str]
) -> None:
    await api.node("hv-1")
    await api.node("hv-2")
    team = await api.token(NS)
    first = await api.client.post(
        URL, json={**SMALL, "node": "hv-1", "request_id": "job-7"}, headers=team
    )
    assert first.status_code == 201
    for dry_run in ("?dry_run=true", ""):
        again = await api.client.post(
            URL + dry_run,
            json={**SMALL, "node": "hv-1", "request_id": "job-7", **changed},
            headers=team,
        )
        assert again.status_code == 409, again.text
        body = again.json()
        assert (body["error"], body["fields"]) == ("request_id_reused", fields)
        assert (body["request_id"], body["placement_id"]) == ("job-7", first.json()["id"])
        assert "job-7" in body["message"] and all(f in body["message"] for f in fields)
    # Nothing was admitted for it, and the same body still replays.
    assert len((await api.client.get(URL, headers=team)).json()) == 1
    assert await node_used(api, "hv-1") == SMALL
    same = {**SMALL, "node": "hv-1", "request_id": "job-7"}
    replay = await api.client.post(URL, json=same, headers=team)
    assert replay.status_code == 201 and replay.json() == first.json()
    # A replay need not repeat the node the first request left to the ranking.
    unforced = await api.client.post(URL, json={**SMALL, "request_id": "job-7"}, headers=team)
    assert unforced.status_code == 201


async def test_two_racing_requests_under_one_id_with_different_bodies_get_201_and_409(
    api: Api,
) -> None:
    # Both may pass the read-before-admit check; the one whose INSERT meets the first's row (in
    # its own transaction or in a group-commit batch) is still compared, never replayed blindly.
    await api.node("hv-1")
    team = await api.token(NS)
    bodies = [{**SMALL, "request_id": "race"}, {**SMALL, "cpus": 1, "request_id": "race"}]
    answers = await asyncio.gather(*(api.client.post(URL, json=b, headers=team) for b in bodies))
    assert sorted(a.status_code for a in answers) == [201, 409], [a.text for a in answers]
    placed = next(a.json() for a in answers if a.status_code == 201)
    assert await node_used(api, "hv-1") == {k: placed[k] for k in ("cpus", "memory_mb", "disk_gb")}


async def test_a_replay_reports_the_first_admissions_demand_waiver(api: Api) -> None:
    await api.node("hv-1")
    # Load far above target_load x cpu_schedulable: the demand clause alone refuses, is waived.
    await api.client.put(
        "/v1/nodes/hv-1/metrics", json={"cpu_load_1": 50.0, "cpu_schedulable": 8}, headers=ADMIN
    )
    team = await api.token(NS)
    first = await api.client.post(URL, json={**SMALL, "request_id": "w"}, headers=team)
    assert first.status_code == 201 and first.json()["demand_waived"] is True
    again = await api.client.post(URL, json={**SMALL, "request_id": "w"}, headers=team)
    assert again.json() == first.json()


async def test_no_room_anywhere_is_507_with_every_candidates_dimensions(api: Api) -> None:
    await api.node("hv-1", threads=1)  # 3 vCPUs
    await api.node("hv-2", threads=1)
    team = await api.token(NS)
    r = await api.client.post(URL, json={**SMALL, "cpus": 4, "node": None}, headers=team)
    assert r.status_code == 507
    body = r.json()
    assert body["error"] == "insufficient_capacity"
    assert "2 candidate" in body["message"]
    assert sorted(c["node"] for c in body["candidates"]) == ["hv-1", "hv-2"]
    for candidate in body["candidates"]:
        cpus = next(d for d in candidate["dimensions"] if d["dimension"] == "cpus")
        assert cpus["exceeded"] is True and cpus["requested"] == 4
        assert set(cpus) >= {"dimension", "limit", "used", "requested", "exceeded"}
        assert candidate["stage"] in {"node", "cluster"}
    # The refusal's audit trail is readable under the subject the 507 names.
    events = await api.client.get("/v1/events", params={"namespace": NS}, headers=ADMIN)
    assert body["audit_subject"] in {e["subject"] for e in events.json()}


async def test_with_no_nodes_at_all_the_answer_is_507_with_no_candidates(api: Api) -> None:
    r = await api.client.post(URL, json=SMALL, headers=await api.token(NS))
    assert r.status_code == 507 and r.json()["candidates"] == []


async def test_a_forced_node_that_does_not_exist_is_404(api: Api) -> None:
    r = await api.client.post(URL, json={**SMALL, "node": "ghost"}, headers=ADMIN)
    assert r.status_code == 404 and r.json()["message"] == "node not found"


async def test_release_is_204_once_then_404_and_credits_once(api: Api) -> None:
    await api.node("hv-1")
    team = await api.token(NS)
    keep = (await api.client.post(URL, json=SMALL, headers=team)).json()
    gone = (await api.client.post(URL, json=SMALL, headers=team)).json()
    assert (await api.client.delete(f"{URL}/{gone['id']}", headers=team)).status_code == 204
    second = await api.client.delete(f"{URL}/{gone['id']}", headers=team)
    assert second.status_code == 404
    assert second.json() == {"error": "not_found", "message": "placement not found"}
    assert await node_used(api, "hv-1") == SMALL  # only `keep` remains charged
    assert [p["id"] for p in (await api.client.get(URL, headers=team)).json()] == [keep["id"]]


async def test_another_namespaces_placement_is_exactly_a_missing_one(api: Api) -> None:
    await api.node("hv-1")
    theirs = (
        await api.client.post(
            "/v1/namespaces/team-b/placements", json=SMALL, headers=await api.token("team-b")
        )
    ).json()
    team = await api.token(NS)
    missing = await api.client.get(f"{URL}/00000000-0000-0000-0000-000000000000", headers=team)
    for method in ("GET", "DELETE"):
        # Asked for in its own namespace: exactly a missing one.
        r = await api.client.request(method, f"{URL}/{theirs['id']}", headers=team)
        assert (r.status_code, r.json()) == (404, missing.json())
        # Asked for in the other namespace: not allowed, as for anything there.
        r = await api.client.request(
            method, f"/v1/namespaces/team-b/placements/{theirs['id']}", headers=team
        )
        assert r.status_code == 403 and r.json()["error"] == "forbidden"
    assert await node_used(api, "hv-1") == SMALL  # nothing was released


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**SMALL, "cpus": -1}, "cpus"),
        ({**SMALL, "cpus": True}, "cpus"),
        ({**SMALL, "cpus": 1.5}, "cpus"),
        ({**SMALL, "memory_mb": "1024"}, "memory_mb"),
        ({**SMALL, "disk_gb": 2**62}, "disk_gb"),
        ({"cpus": 1, "memory_mb": 1}, "disk_gb"),
        ({**SMALL, "request_id": "has space"}, "request_id"),
        ({**SMALL, "request_id": "x" * 129}, "request_id"),
        ({**SMALL, "node": "bad/name"}, "node"),
        ({**SMALL, "colour": "red"}, "colour"),
    ],
)
async def test_invalid_input_is_422_naming_the_field(
    api: Api, body: dict[str, object], field: str
) -> None:
    r = await api.client.post(URL, json=body, headers=await api.token(NS))
    assert r.status_code == 422
    assert field in [f["field"] for f in r.json()["fields"]]


async def test_an_invalid_namespace_or_id_is_422_for_the_admin(api: Api) -> None:
    r = await api.client.get("/v1/namespaces/Team_A/placements", headers=ADMIN)
    assert r.status_code == 422 and r.json()["fields"][0]["field"] == "ns"
    r = await api.client.get(f"{URL}/not%20an%20id", headers=ADMIN)
    assert r.status_code == 422 and r.json()["fields"][0]["field"] == "placement_id"


def next_url(link: str) -> str:
    """The target of a ``Link: <url>; rel="next"`` header."""
    target, rel = link.split(";")
    assert rel.strip() == 'rel="next"' and target.startswith("<") and target.endswith(">")
    return target[1:-1]


async def test_walking_the_pages_returns_every_placement_once_by_id(api: Api) -> None:
    await api.node("hv-1", threads=16)
    team = await api.token(NS)
    made = [(await api.client.post(URL, json=SMALL, headers=team)).json()["id"] for _ in range(7)]
    await api.client.post("/v1/namespaces/team-b/placements", json=SMALL, headers=ADMIN)
    walked: list[str] = []
    url: str | None = f"{URL}?limit=3"
    pages = 0
    while url is not None:
        r = await api.client.get(url, headers=team)
        assert r.status_code == 200
        page = r.json()
        pages += 1
        walked += [p["id"] for p in page]
        # The next link is there exactly when the page is full, and resumes after its last id.
        if len(page) == 3:
            assert next_url(r.headers["Link"]) == f"{URL}?limit=3&after={page[-1]['id']}"
            url = next_url(r.headers["Link"])
        else:
            assert "Link" not in r.headers
            url = None
    assert (walked, pages) == (sorted(made), 3)
    # The default page holds them all and is not full: no link.
    r = await api.client.get(URL, headers=team)
    assert [p["id"] for p in r.json()] == sorted(made) and "Link" not in r.headers


async def test_a_full_last_page_links_to_an_empty_one(api: Api) -> None:
    await api.node("hv-1")
    team = await api.token(NS)
    made = sorted(
        [(await api.client.post(URL, json=SMALL, headers=team)).json()["id"] for _ in range(2)]
    )
    r = await api.client.get(URL, params={"limit": 2}, headers=team)
    assert [p["id"] for p in r.json()] == made
    last = await api.client.get(next_url(r.headers["Link"]), headers=team)
    assert (last.status_code, last.json(), "Link" in last.headers) == (200, [], False)


async def test_another_namespaces_list_is_403_with_or_without_a_page(api: Api) -> None:
    await api.node("hv-1")
    theirs = (await api.client.post(URL, json=SMALL, headers=ADMIN)).json()
    other = await api.token("team-b")
    for params in ({}, {"limit": 1}, {"after": theirs["id"], "limit": 10}):
        r = await api.client.get(URL, params=params, headers=other)
        assert r.status_code == 403, params
        assert r.json() == {
            "error": "forbidden",
            "message": "not allowed: this token acts only in namespace team-b",
        }


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 1001}, "limit"),
        ({"limit": "many"}, "limit"),
        ({"after": "not an id"}, "after"),
        ({"after": "0" * 37}, "after"),
        ({"after": ""}, "after"),
    ],
)
async def test_a_bad_page_is_422_naming_the_parameter(
    api: Api, params: dict[str, str | int | float], field: str
) -> None:
    r = await api.client.get(URL, params=params, headers=await api.token(NS))
    assert r.status_code == 422
    assert r.json()["fields"][0]["field"] == field
