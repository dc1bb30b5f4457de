"""The audit trail over HTTP: filters, paging, and a namespace token confined to its namespace."""

from __future__ import annotations

from tests.apps.api.conftest import ADMIN, Api

SIZE = {"cpus": 1, "memory_mb": 1, "disk_gb": 1}


async def place(api: Api, namespace: str) -> None:
    r = await api.client.post(
        f"/v1/namespaces/{namespace}/placements", json=SIZE, headers=await api.token(namespace)
    )
    assert r.status_code == 201


async def test_the_admin_reads_everything_and_filters_by_namespace_and_kind(api: Api) -> None:
    await api.node("hv-1")
    await place(api, "team-a")
    await place(api, "team-b")
    everything = (await api.client.get("/v1/events", headers=ADMIN)).json()
    # The node's own event (its addition) is about no namespace.
    assert {e["namespace"] for e in everything} == {None, "team-a", "team-b"}
    ids = [e["id"] for e in everything]
    assert ids == sorted(ids)
    only_a = (
        await api.client.get(
            "/v1/events",
            params={"namespace": "team-a", "kind": "instance placed"},
            headers=ADMIN,
        )
    ).json()
    assert len(only_a) == 1 and only_a[0]["namespace"] == "team-a"
    assert only_a[0]["data"]["node"] == "hv-1"


async def test_paging_with_after_id_and_limit(api: Api) -> None:
    await api.node("hv-1")
    for _ in range(3):
        await place(api, "team-a")
    first = (await api.client.get("/v1/events", params={"limit": 2}, headers=ADMIN)).json()
    rest = (
        await api.client.get("/v1/events", params={"after_id": first[-1]["id"]}, headers=ADMIN)
    ).json()
    everything = (await api.client.get("/v1/events", headers=ADMIN)).json()
    assert len(first) == 2 and first + rest == everything


async def test_a_namespace_token_sees_only_its_own_namespace(api: Api) -> None:
    await api.node("hv-1")
    await place(api, "team-a")
    await place(api, "team-b")
    team_a = await api.token("team-a")
    mine = (await api.client.get("/v1/events", headers=team_a)).json()
    assert mine and {e["namespace"] for e in mine} == {"team-a"}
    other = await api.client.get("/v1/events", params={"namespace": "team-b"}, headers=team_a)
    assert other.status_code == 403
    assert other.json() == {
        "error": "forbidden",
        "message": "not allowed: this token acts only in namespace team-a",
    }


async def test_bad_filters_are_422_naming_them(api: Api) -> None:
    for params, field in (
        ({"limit": 0}, "limit"),
        ({"limit": 1001}, "limit"),
        ({"after_id": -1}, "after_id"),
        ({"namespace": "Not Valid"}, "namespace"),
        ({"kind": "bad\u0000kind"}, "kind"),
        ({"colour": "red"}, "colour"),
    ):
        r = await api.client.get("/v1/events", params=params, headers=ADMIN)
        assert r.status_code == 422, params
        assert r.json()["fields"][0]["field"] == field


async def test_newest_first_on_request_paged_back_with_before_id_and_filtered_by_kind(
    api: Api,
) -> None:
    await api.node("hv-1")
    for _ in range(3):
        await place(api, "team-a")
    oldest_first = (await api.client.get("/v1/events", headers=ADMIN)).json()
    get = api.client.get
    newest = (await get("/v1/events", params={"order": "desc"}, headers=ADMIN)).json()
    assert [e["id"] for e in newest] == [e["id"] for e in reversed(oldest_first)]
    placed = {"order": "desc", "kind": "instance placed", "limit": 2}
    page = (await get("/v1/events", params=placed, headers=ADMIN)).json()
    assert [e["kind"] for e in page] == ["instance placed"] * 2
    assert page[0]["id"] > page[1]["id"]
    rest = await get("/v1/events", params={**placed, "before_id": page[1]["id"]}, headers=ADMIN)
    assert [e["kind"] for e in rest.json()] == ["instance placed"]
    assert rest.json()[0]["id"] < page[1]["id"]
    bad = await get("/v1/events", params={"order": "sideways"}, headers=ADMIN)
    assert bad.status_code == 422 and "order" in bad.text


async def test_each_change_is_recorded_once_with_its_request_id(api: Api) -> None:
    """Written in the change's transaction, then emitted to the sinks: never twice, and stamped
    with the request's id before the ledger writes it (issue 34)."""
    await api.node("hv-1")
    ns = "team-a"

    async def call(method: str, path: str, trace: str, **body: object) -> dict[str, object]:
        headers = {**ADMIN, "X-Request-ID": trace}
        r = await api.client.request(method, path, json=body or None, headers=headers)
        assert r.status_code < 300, r.text
        return r.json() if r.content else {}

    placed = await call("POST", f"/v1/namespaces/{ns}/placements", "place-1", **SIZE)
    await call("DELETE", f"/v1/namespaces/{ns}/placements/{placed['id']}", "release-1")
    claims = f"/v1/namespaces/{ns}/claims"
    claim = await call("POST", claims, "claim-1", **SIZE, expires_in_seconds=600)
    await call("PATCH", f"{claims}/{claim['id']}", "claim-2", cpus=2)
    await call("DELETE", f"{claims}/{claim['id']}", "claim-3")
    node = {"threads": 4, "memory_mb": 1024, "disk_gb": 10}
    await call("PUT", "/v1/nodes/hv-2", "node-1", **node)
    await call("PUT", "/v1/nodes/hv-2", "node-2", **{**node, "threads": 8})
    await call("POST", "/v1/nodes/hv-2/cordon", "node-3")
    await call("POST", "/v1/nodes/hv-2/uncordon", "node-4")
    await call("DELETE", "/v1/nodes/hv-2", "node-5")
    tokens = f"/v1/admin/namespaces/{ns}/tokens"
    token = await call("POST", tokens, "token-1")
    await call("DELETE", f"{tokens}/{token['id']}", "token-2")
    events = (await api.client.get("/v1/events", params={"limit": 1000}, headers=ADMIN)).json()
    stamped = sorted((e["kind"], e["data"].get("request_id")) for e in events)
    for kind, trace in [
        ("instance placed", "place-1"),
        ("instance placement released", "release-1"),
        ("namespace claim created", "claim-1"),
        ("namespace claim updated", "claim-2"),
        ("namespace claim deleted", "claim-3"),
        ("node updated in the ledger", "node-2"),
        ("node cordoned in the ledger", "node-3"),
        ("node uncordoned in the ledger", "node-4"),
        ("node left the ledger", "node-5"),
        ("token created", "token-1"),
        ("token revoked", "token-2"),
    ]:
        assert stamped.count((kind, trace)) == 1, (kind, stamped)
        assert [k for k, _ in stamped].count(kind) == 1, (kind, stamped)
    # hv-1 joined too (before any of these), under its own request id.
    joined = [t for k, t in stamped if k == "node joined the ledger"]
    assert len(joined) == 2 and "node-1" in joined, stamped
