"""Nodes over HTTP: add/replace, metrics, cordon, remove (409 while busy), reads, validation."""

from __future__ import annotations

import pytest

from tests.apps.api.conftest import ADMIN, Api

NS = "team-a"


async def test_put_adds_then_replaces_keeping_counters(api: Api) -> None:
    r = await api.client.put(
        "/v1/nodes/hv-1",
        json={"threads": 4, "memory_mb": 8192, "disk_gb": 100, "pool": "gp", "labels": {"a": "b"}},
        headers=ADMIN,
    )
    assert r.status_code == 201
    body = r.json()
    assert body["limits"] == {"cpus": 12, "memory_mb": 8192, "disk_gb": 100}  # cpu overcommit 3
    assert (body["pool"], body["labels"], body["schedulable"]) == ("gp", {"a": "b"}, True)
    team = await api.token(NS)
    placed = await api.client.post(
        f"/v1/namespaces/{NS}/placements",
        json={"cpus": 2, "memory_mb": 1024, "disk_gb": 10},
        headers=team,
    )
    assert placed.status_code == 201
    r = await api.client.put(
        "/v1/nodes/hv-1", json={"threads": 8, "memory_mb": 8192, "disk_gb": 100}, headers=ADMIN
    )
    assert r.status_code == 200
    assert r.json()["limits"]["cpus"] == 24
    assert r.json()["used"] == {"cpus": 2, "memory_mb": 1024, "disk_gb": 10}
    assert r.json()["pool"] == ""


async def test_reads_list_by_name_and_404_for_a_missing_node(api: Api) -> None:
    for name in ("b-node", "a-node"):
        await api.node(name)
    r = await api.client.get("/v1/nodes", headers=ADMIN)
    assert [n["name"] for n in r.json()] == ["a-node", "b-node"]
    assert (await api.client.get("/v1/nodes/a-node", headers=ADMIN)).json()["name"] == "a-node"
    r = await api.client.get("/v1/nodes/nope", headers=ADMIN)
    assert r.status_code == 404
    assert r.json() == {"error": "not_found", "message": "node not found"}


async def test_metrics_are_published_and_may_be_unknown(api: Api) -> None:
    await api.node("hv-1")
    r = await api.client.put(
        "/v1/nodes/hv-1/metrics", json={"cpu_load_1": 1.5, "cpu_schedulable": 8}, headers=ADMIN
    )
    assert r.status_code == 200
    assert (r.json()["cpu_load_1"], r.json()["cpu_schedulable"]) == (1.5, 8)
    r = await api.client.put(
        "/v1/nodes/hv-1/metrics", json={"cpu_load_1": None, "cpu_schedulable": None}, headers=ADMIN
    )
    assert (r.json()["cpu_load_1"], r.json()["cpu_schedulable"]) == (None, None)
    r = await api.client.put(
        "/v1/nodes/ghost/metrics", json={"cpu_load_1": 1, "cpu_schedulable": 1}, headers=ADMIN
    )
    assert r.status_code == 404


async def test_a_cordoned_node_admits_nothing_until_uncordoned(api: Api) -> None:
    await api.node("hv-1")
    team = await api.token(NS)
    r = await api.client.post("/v1/nodes/hv-1/cordon", headers=ADMIN)
    assert r.status_code == 200 and r.json()["schedulable"] is False
    size = {"cpus": 1, "memory_mb": 1, "disk_gb": 1, "node": "hv-1"}
    refused = await api.client.post(f"/v1/namespaces/{NS}/placements", json=size, headers=team)
    assert refused.status_code == 507
    assert refused.json()["candidates"][0]["cordoned"] is True
    r = await api.client.post("/v1/nodes/hv-1/uncordon", headers=ADMIN)
    assert r.json()["schedulable"] is True
    placed = await api.client.post(f"/v1/namespaces/{NS}/placements", json=size, headers=team)
    assert placed.status_code == 201
    assert (await api.client.post("/v1/nodes/ghost/cordon", headers=ADMIN)).status_code == 404


async def test_delete_is_409_while_busy_then_204_then_404(api: Api) -> None:
    await api.node("hv-1")
    team = await api.token(NS)
    placed = await api.client.post(
        f"/v1/namespaces/{NS}/placements",
        json={"cpus": 1, "memory_mb": 1, "disk_gb": 1},
        headers=team,
    )
    r = await api.client.delete("/v1/nodes/hv-1", headers=ADMIN)
    assert r.status_code == 409
    assert r.json()["error"] == "node_busy" and r.json()["placements"] == 1
    pid = placed.json()["id"]
    await api.client.delete(f"/v1/namespaces/{NS}/placements/{pid}", headers=team)
    assert (await api.client.delete("/v1/nodes/hv-1", headers=ADMIN)).status_code == 204
    assert (await api.client.delete("/v1/nodes/hv-1", headers=ADMIN)).status_code == 404


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/nodes/hv-1", {"threads": -1, "memory_mb": 1, "disk_gb": 1}, "threads"),
        # A node without threads or memory admits nothing: refused, not stored (issue 42).
        ("/v1/nodes/hv-1", {"threads": 0, "memory_mb": 1, "disk_gb": 1}, "threads"),
        ("/v1/nodes/hv-1", {"threads": 1, "memory_mb": 0, "disk_gb": 1}, "memory_mb"),
        ("/v1/nodes/hv-1", {"threads": True, "memory_mb": 1, "disk_gb": 1}, "threads"),
        ("/v1/nodes/hv-1", {"threads": "4", "memory_mb": 1, "disk_gb": 1}, "threads"),
        ("/v1/nodes/hv-1", {"threads": 1, "memory_mb": 1}, "disk_gb"),
        ("/v1/nodes/hv-1", {"threads": 1, "memory_mb": 2**63, "disk_gb": 1}, "memory_mb"),
        ("/v1/nodes/hv-1", {"threads": 1, "memory_mb": 1, "disk_gb": 1, "extra": 1}, "extra"),
        ("/v1/nodes/hv-1", {"threads": 1, "memory_mb": 1, "disk_gb": 1, "pool": "a b"}, "pool"),
        ("/v1/nodes/-bad-", {"threads": 1, "memory_mb": 1, "disk_gb": 1}, "name"),
        ("/v1/nodes/" + "a" * 254, {"threads": 1, "memory_mb": 1, "disk_gb": 1}, "name"),
        ("/v1/nodes/hv-1/metrics", {"cpu_load_1": -0.5, "cpu_schedulable": 1}, "cpu_load_1"),
        ("/v1/nodes/hv-1/metrics", {"cpu_load_1": 1, "cpu_schedulable": 1.5}, "cpu_schedulable"),
    ],
)
async def test_invalid_input_is_422_naming_the_field(
    api: Api, path: str, body: dict[str, object], field: str
) -> None:
    r = await api.client.put(path, json=body, headers=ADMIN)
    assert r.status_code == 422
    assert r.json()["error"] == "invalid_request"
    assert field in [f["field"] for f in r.json()["fields"]]
    assert field in r.json()["message"]


async def test_walking_the_pages_returns_every_node_once_by_name(api: Api) -> None:
    names = [f"hv-{i:02d}" for i in range(5)]
    for name in reversed(names):
        await api.node(name)
    walked: list[str] = []
    r = await api.client.get("/v1/nodes", params={"limit": 2}, headers=ADMIN)
    while True:
        assert r.status_code == 200
        walked += [n["name"] for n in r.json()]
        if "Link" not in r.headers:
            break
        assert len(r.json()) == 2
        target, rel = r.headers["Link"].split("; ")
        assert target == f"</v1/nodes?limit=2&after={walked[-1]}>" and rel == 'rel="next"'
        r = await api.client.get(target[1:-1], headers=ADMIN)
    assert walked == names and len(r.json()) == 1
    whole = await api.client.get("/v1/nodes", headers=ADMIN)
    assert [n["name"] for n in whole.json()] == names and "Link" not in whole.headers


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 1001}, "limit"),
        ({"limit": 1.5}, "limit"),
        ({"after": "bad/name"}, "after"),
        ({"after": ""}, "after"),
    ],
)
async def test_a_bad_page_is_422_naming_the_parameter(
    api: Api, params: dict[str, str | int | float], field: str
) -> None:
    r = await api.client.get("/v1/nodes", params=params, headers=ADMIN)
    assert r.status_code == 422
    assert r.json()["fields"][0]["field"] == field


async def test_a_namespace_token_cannot_page_the_nodes(api: Api) -> None:
    r = await api.client.get("/v1/nodes", params={"limit": 1}, headers=await api.token(NS))
    assert r.status_code == 403


async def test_each_node_write_is_recorded_once_with_its_request_id(api: Api) -> None:
    """Add, replace, cordon, uncordon and remove each commit one event with the write, stamped
    with the request's id; a refused write (404, 409) records none (issue 34)."""
    node = {"threads": 8, "memory_mb": 32768, "disk_gb": 500}
    writes = [
        ("PUT", "/v1/nodes/hv-1", "add-1", node, 201),
        ("PUT", "/v1/nodes/hv-1", "update-1", {**node, "threads": 16, "pool": "big"}, 200),
        ("POST", "/v1/nodes/hv-1/cordon", "cordon-1", None, 200),
        ("POST", "/v1/nodes/hv-1/uncordon", "uncordon-1", None, 200),
        ("POST", "/v1/nodes/hv-2/cordon", "missing-1", None, 404),
        ("DELETE", "/v1/nodes/hv-1", "delete-1", None, 204),
        ("DELETE", "/v1/nodes/hv-1", "gone-1", None, 404),
    ]
    for method, path, trace, body, expected in writes:
        headers = {**ADMIN, "X-Request-ID": trace}
        r = await api.client.request(method, path, json=body, headers=headers)
        assert r.status_code == expected, (trace, r.text)
    events = (await api.client.get("/v1/events", params={"limit": 1000}, headers=ADMIN)).json()
    assert [(e["kind"], e["subject"], e["data"]["request_id"]) for e in events] == [
        ("node joined the ledger", "hv-1", "add-1"),
        ("node updated in the ledger", "hv-1", "update-1"),
        ("node cordoned in the ledger", "hv-1", "cordon-1"),
        ("node uncordoned in the ledger", "hv-1", "uncordon-1"),
        ("node left the ledger", "hv-1", "delete-1"),
    ]
    assert all(e["namespace"] is None for e in events)
    # An addition and a replacement say what the node was declared as.
    assert events[1]["data"] == {
        "node": "hv-1",
        "pool": "big",
        "capacity": {"threads": 16, "memory_mb": 32768, "disk_gb": 500},
        "labels": {},
        "request_id": "update-1",
    }


async def test_removing_a_busy_node_records_no_event(api: Api) -> None:
    await api.node("hv-1")
    team = await api.token(NS)
    placed = await api.client.post(
        f"/v1/namespaces/{NS}/placements",
        json={"cpus": 1, "memory_mb": 1, "disk_gb": 1},
        headers=team,
    )
    assert placed.status_code == 201
    assert (await api.client.delete("/v1/nodes/hv-1", headers=ADMIN)).status_code == 409
    left = await api.client.get(
        "/v1/events", params={"kind": "node left the ledger"}, headers=ADMIN
    )
    assert left.json() == []
