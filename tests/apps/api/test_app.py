"""The app factory: the OpenAPI document (security, errors, links), docs, and the lifespan."""

from __future__ import annotations

from typing import Any

import pytest

from fleetgate.apps.api.app import create_app
from fleetgate.apps.container import build_container
from fleetgate.apps.settings import ApiSettings, Settings
from tests.apps.api.conftest import Api

UNAUTHENTICATED = {"/healthz", "/readyz", "/metrics"}


@pytest.fixture(scope="module")
def openapi() -> dict[str, Any]:
    app = create_app(build_container(Settings(api=ApiSettings(admin_token="t"))))
    document: dict[str, Any] = app.openapi()
    return document


def operations(openapi: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, op)
        for path, methods in openapi["paths"].items()
        for method, op in methods.items()
    ]


def test_every_v1_operation_needs_the_bearer_token_and_documents_401(
    openapi: dict[str, Any],
) -> None:
    assert openapi["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    for path, method, op in operations(openapi):
        if path in UNAUTHENTICATED:
            assert "security" not in op, path
            continue
        assert op["security"] == [{"HTTPBearer": []}], (method, path)
        assert "401" in op["responses"], (method, path)


def test_every_error_response_documents_the_one_error_shape(openapi: dict[str, Any]) -> None:
    assert "HTTPValidationError" not in openapi["components"]["schemas"]
    for path, _, op in operations(openapi):
        for status, response in op["responses"].items():
            if status.startswith(("4", "5")):
                schema = response["content"]["application/json"]["schema"]
                name = schema["$ref"].rsplit("/", 1)[-1]
                assert name in {"ErrorBody", "CapacityRefusal", "DimensionsRefusal"}, (path, status)


def test_links_chain_create_get_patch_delete_for_claims(openapi: dict[str, Any]) -> None:
    created = openapi["paths"]["/v1/namespaces/{ns}/claims"]["post"]["responses"]["201"]["links"]
    assert {link["operationId"] for link in created.values()} == {
        "get_claim",
        "update_claim",
        "delete_claim",
    }
    assert created["GetClaim"]["parameters"]["claim_id"] == "$response.body#/id"
    placed = openapi["paths"]["/v1/namespaces/{ns}/placements"]["post"]["responses"]["201"]
    assert {link["operationId"] for link in placed["links"].values()} == {
        "get_placement",
        "release_placement",
    }
    ids = {op["operationId"] for _, _, op in operations(openapi)}
    for _, _, op in operations(openapi):
        for response in op["responses"].values():
            for link in response.get("links", {}).values():
                assert link["operationId"] in ids


async def test_the_docs_page_is_served(api: Api) -> None:
    r = await api.client.get("/docs")
    assert r.status_code == 200 and "openapi.json" in r.text


async def test_the_docs_load_their_assets_from_the_server_under_a_strict_csp(api: Api) -> None:
    r = await api.client.get("/docs")
    csp = r.headers["content-security-policy"]
    assert "script-src 'self' 'sha256-" in csp and "default-src 'none'" in csp
    assert "http" not in csp and "unsafe" not in csp  # no CDN, no inline code but the hashed one
    assert "cdn" not in r.text
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "favicon.png"):
        assert f'"/docs/static/{asset}"' in r.text
        served = await api.client.get(f"/docs/static/{asset}")
        assert served.status_code == 200 and len(served.content) > 1000, asset
    assert (await api.client.get("/redoc")).status_code == 404  # it would load from a CDN


async def test_the_lifespan_starts_and_closes_the_ledger(tmp_sqlite_url: str) -> None:
    container = build_container(Settings(database_url=tmp_sqlite_url))
    app = create_app(container)
    ledger = container.ledger()
    async with app.router.lifespan_context(app):
        assert ledger.store.started
        assert (await ledger.cluster()).total.cpus == 0  # migrated: the cluster row exists
    assert not ledger.store.started
