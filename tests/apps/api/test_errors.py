"""The one error shape: ApiError, validation errors naming fields, routing errors, and bugs."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from fleetgate.apps.api.errors import (
    ApiError,
    field_name,
    install_error_handlers,
    not_found,
    validation_error,
)
from fleetgate.domain.capacity.errors import LedgerUnavailable
from tests.apps.api.conftest import ADMIN, Api


@pytest.mark.parametrize(
    ("loc", "name"),
    [
        (("body", "cpus"), "cpus"),
        (("path", "ns"), "ns"),
        (("query", "limit"), "limit"),
        (("body", "labels", "a"), "labels.a"),
        (("body",), "body"),
        ((), "body"),
    ],
)
def test_field_name(loc: tuple[str, ...], name: str) -> None:
    assert field_name(loc) == name


def test_an_error_body_is_code_message_then_details() -> None:
    error = ApiError(409, "node_busy", "busy", placements=2)
    assert error.body() == {"error": "node_busy", "message": "busy", "placements": 2}
    assert not_found("claim").body() == {"error": "not_found", "message": "claim not found"}


def test_validation_errors_name_every_field_without_pydantic_prefixes() -> None:
    error = validation_error(
        [
            {"loc": ("body", "cpus"), "msg": "Input should be a valid integer"},
            {"loc": ("body",), "msg": "Value error, give at least one field"},
        ]
    )
    assert error.status == 422
    assert error.details["fields"] == [
        {"field": "cpus", "location": "body", "reason": "Input should be a valid integer"},
        {"field": "body", "location": "body", "reason": "give at least one field"},
    ]
    assert error.message == "cpus: Input should be a valid integer; body: give at least one field"


@pytest.fixture
def bare() -> FastAPI:
    """An app with only the handlers, and routes that fail in each way a route can."""
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/bug")
    async def bug() -> None:
        raise RuntimeError("boom")

    @app.get("/domain")
    async def domain() -> None:
        raise ValueError("cpus: must not be negative, got -1")

    @app.get("/down")
    async def down() -> None:
        raise LedgerUnavailable("read nodes: cannot reach the database")

    return app


async def test_a_bug_is_a_500_in_the_error_shape_without_details(bare: FastAPI) -> None:
    transport = httpx.ASGITransport(app=bare, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        r = await client.get("/bug")
    assert r.status_code == 500
    assert r.json() == {"error": "internal_error", "message": "internal error; see the server log"}


async def test_a_domain_value_error_is_a_422_naming_its_field(bare: FastAPI) -> None:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=bare), base_url="http://t") as c:
        r = await c.get("/domain")
        assert r.status_code == 422
        assert r.json()["fields"] == [
            {"field": "cpus", "location": "body", "reason": "must not be negative, got -1"}
        ]
        down = await c.get("/down")
        assert (down.status_code, down.json()["error"]) == (503, "unavailable")


async def test_unknown_paths_and_methods_share_the_shape(api: Api) -> None:
    r = await api.client.get("/v2/anything")
    assert r.status_code == 404 and r.json() == {"error": "not_found", "message": "not found"}
    r = await api.client.request("PATCH", "/v1/nodes/hv-1", headers=ADMIN)
    assert r.status_code == 405 and r.json()["error"] == "method_not_allowed"
    # Every method the path serves, not only the first route's.
    assert r.headers["Allow"] == "DELETE, GET, PUT"


async def test_a_body_that_is_not_json_is_a_422(api: Api) -> None:
    r = await api.client.put(
        "/v1/nodes/hv-1",
        content=b"\xff\xfe{",
        headers={**ADMIN, "Content-Type": "application/json"},
    )
    assert r.status_code == 422 and r.json()["fields"][0]["field"] == "body"


async def test_a_body_larger_than_a_mebibyte_is_413_unread(api: Api) -> None:
    big = b'{"policy": "' + b"x" * (1 << 20) + b'", "expire_after": "1d"}'
    r = await api.client.post(
        "/v1/rotation/check", content=big, headers={**ADMIN, "Content-Type": "application/json"}
    )
    assert r.status_code == 413 and r.json()["error"] == "too_large"


async def test_a_chunked_body_is_cut_off_at_the_cap(api: Api) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"policy": "'
        for _ in range(17):
            yield b"x" * 65536
        yield b'", "expire_after": "1d"}'

    r = await api.client.post(
        "/v1/rotation/check",
        content=chunks(),
        headers={**ADMIN, "Content-Type": "application/json"},
    )
    assert r.status_code == 413 and r.json()["error"] == "too_large"


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "text/yaml; charset=utf-8", None],
)
async def test_a_body_sent_as_another_type_is_415_naming_the_type_needed(
    api: Api, content_type: str | None
) -> None:
    # Issue 42: it said "Input should be a valid dictionary", no word of Content-Type.
    body = b'{"threads": 4, "memory_mb": 1024, "disk_gb": 10}'
    sent = {} if content_type is None else {"Content-Type": content_type}
    r = await api.client.put("/v1/nodes/hv-1", content=body, headers={**ADMIN, **sent})
    assert r.status_code == 415, r.text
    media = (content_type or "").partition(";")[0]
    was = f"it was sent as {media}" if media else "it was sent without one"
    reason = f"must be JSON sent with Content-Type: application/json ({was})"
    assert r.json() == {
        "error": "unsupported_media_type",
        "message": f"body: {reason}",
        "fields": [{"field": "body", "location": "header", "reason": reason}],
    }
    # Sent as JSON, it is taken.
    for media in ("application/json", "application/merge-patch+json; charset=utf-8"):
        headers = {**ADMIN, "Content-Type": media}
        r = await api.client.put("/v1/nodes/hv-1", content=body, headers=headers)
        assert r.status_code in (200, 201), r.text


async def test_every_operation_that_reads_a_body_documents_its_415(api: Api) -> None:
    # Any route with a JSON body answers 415 to a body of another type; the document says so.
    document = (await api.client.get("/openapi.json")).json()
    with_body = [
        (method, path, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if "requestBody" in operation
    ]
    assert with_body, "the API has routes that read a body"
    undocumented = [f"{m.upper()} {p}" for m, p, op in with_body if "415" not in op["responses"]]
    assert undocumented == []
