"""The authorization matrix: every endpoint × no token, another namespace's token, the
namespace's own token, and the admin token — one parametrized test.

The namespace under test is ``team-a``; "other" holds a token of ``team-b``. A namespace token
naming another namespace gets a 403 whether that namespace holds anything or not (issue 42:
"not found" was a lie about a namespace that exists; docs/api.md, "Who may do what").
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.apps.api.conftest import ADMIN, Api

NONE, OTHER, OWN, ADM = "none", "other", "own", "admin"
PRINCIPALS = (NONE, OTHER, OWN, ADM)
NODE = {"threads": 4, "memory_mb": 4096, "disk_gb": 100}
SIZE = {"cpus": 1, "memory_mb": 1, "disk_gb": 1}
CLAIM = {"cpus": 2, "memory_mb": 2, "disk_gb": 2, "expires_in_seconds": 600}
CHECK = {
    "policy": {
        "apiVersion": "fleetgate.io/v1alpha1",
        "kind": "RotationPolicy",
        "metadata": {"name": "p"},
        "spec": {
            "nodePoolSelector": {"matchLabels": {"pool": "a"}},
            "maintenanceWindows": [
                {"timezone": "UTC", "days": ["Sat"], "start": "01:00", "end": "05:00"}
            ],
        },
    },
    "expire_after": "30d",
}
SIMULATE = {
    "policy": CHECK["policy"],
    "fleet": {"fleet": {"labels": {"pool": "a"}, "expireAfter": "7d", "generate": {"count": 2}}},
    "span": "1d",
}

A = "/v1/namespaces/team-a"
T = "/v1/admin/namespaces/team-a/tokens"
# (method, path, body, status for none / other / own / admin)
MATRIX: list[tuple[str, str, Any, tuple[int, int, int, int]]] = [
    ("GET", "/healthz", None, (200, 200, 200, 200)),
    ("GET", "/readyz", None, (200, 200, 200, 200)),
    ("GET", "/metrics", None, (200, 200, 200, 200)),
    ("GET", "/v1/nodes", None, (401, 403, 403, 200)),
    ("GET", "/v1/nodes/hv-1", None, (401, 403, 403, 200)),
    ("PUT", "/v1/nodes/hv-new", NODE, (401, 403, 403, 201)),
    (
        "PUT",
        "/v1/nodes/hv-1/metrics",
        {"cpu_load_1": 0.5, "cpu_schedulable": 4},
        (401, 403, 403, 200),
    ),
    ("POST", "/v1/nodes/hv-1/cordon", None, (401, 403, 403, 200)),
    ("POST", "/v1/nodes/hv-1/uncordon", None, (401, 403, 403, 200)),
    ("DELETE", "/v1/nodes/{EMPTY}", None, (401, 403, 403, 204)),
    ("POST", f"{A}/placements", SIZE, (401, 403, 201, 201)),
    ("GET", f"{A}/placements", None, (401, 403, 200, 200)),
    ("GET", f"{A}/placements/{{P}}", None, (401, 403, 200, 200)),
    ("DELETE", f"{A}/placements/{{P}}", None, (401, 403, 204, 204)),
    ("GET", f"{A}/claims", None, (401, 403, 200, 200)),
    ("POST", f"{A}/claims", CLAIM, (401, 403, 403, 201)),
    ("GET", f"{A}/claims/{{C}}", None, (401, 403, 200, 200)),
    ("PATCH", f"{A}/claims/{{C}}", {"cpus": 3}, (401, 403, 403, 200)),
    ("DELETE", f"{A}/claims/{{C}}", None, (401, 403, 403, 204)),
    ("GET", "/v1/admin/resources", None, (401, 403, 403, 200)),
    ("POST", "/v1/admin/reconcile", None, (401, 403, 403, 200)),
    ("GET", "/v1/events", None, (401, 200, 200, 200)),
    ("GET", "/v1/events?namespace=team-a", None, (401, 403, 200, 200)),
    ("POST", T, None, (401, 403, 403, 201)),
    ("GET", T, None, (401, 403, 403, 200)),
    ("DELETE", f"{T}/{{T}}", None, (401, 403, 403, 204)),
    ("POST", "/v1/rotation/check", CHECK, (401, 200, 200, 200)),
    ("POST", "/v1/rotation/simulate", SIMULATE, (401, 200, 200, 200)),
]


async def _prepare(api: Api, path: str) -> str:
    """Create what the path refers to, and return it with the ids filled in."""
    await api.client.put("/v1/nodes/hv-1", json=NODE, headers=ADMIN)
    ids: dict[str, str] = {}
    if "{EMPTY}" in path:
        await api.client.put("/v1/nodes/hv-empty", json=NODE, headers=ADMIN)
        ids["EMPTY"] = "hv-empty"
    if "{P}" in path:
        r = await api.client.post(f"{A}/placements", json=SIZE, headers=ADMIN)
        ids["P"] = r.json()["id"]
    if "{C}" in path:
        r = await api.client.post(f"{A}/claims", json=CLAIM, headers=ADMIN)
        ids["C"] = r.json()["id"]
    if "{T}" in path:
        await api.token("team-a")
        listed = (await api.client.get(T, headers=ADMIN)).json()
        ids["T"] = listed[0]["id"]
    return path.format(**ids) if ids else path


async def _headers(api: Api, principal: str) -> dict[str, str]:
    if principal == NONE:
        return {}
    if principal == ADM:
        return ADMIN
    return await api.token("team-b" if principal == OTHER else "team-a")


@pytest.mark.parametrize("principal", PRINCIPALS)
@pytest.mark.parametrize(
    ("method", "path", "body", "expected"),
    MATRIX,
    ids=[f"{m} {p}" for m, p, _, _ in MATRIX],
)
async def test_authorization_matrix(
    sqlite_api: Api,
    principal: str,
    method: str,
    path: str,
    body: Any,
    expected: tuple[int, int, int, int],
) -> None:
    api = sqlite_api
    headers = await _headers(api, principal)
    target = await _prepare(api, path)
    r = await api.client.request(method, target, json=body, headers=headers)
    want = expected[PRINCIPALS.index(principal)]
    assert r.status_code == want, r.text
    if want == 401:
        assert r.headers["WWW-Authenticate"] == "Bearer"
        assert r.json()["error"] == "unauthorized"
    elif want == 403:
        assert r.json()["error"] == "forbidden"
    elif want == 404:
        assert r.json()["error"] == "not_found"
