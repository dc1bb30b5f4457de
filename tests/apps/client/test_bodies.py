"""The client's wire shapes (``bodies``) against the API's own: the served OpenAPI document
and the pydantic bodies it is generated from, so the two definitions cannot drift apart."""

from __future__ import annotations

import types
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, Literal, Union, get_args, get_origin

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter

from fleetgate.apps.api.app import create_app
from fleetgate.apps.client import bodies
from fleetgate.apps.client.bodies import BODIES, NodeBody, Wire, WireError, hints, read_datetime
from fleetgate.apps.container import build_container
from fleetgate.apps.settings import ApiSettings, Settings

#: What each client call answers, and the route that serves it: (method, path, status, body,
#: a list of them?).
READS = [
    ("get", "/v1/nodes", "200", "NodeBody", True),
    ("get", "/v1/nodes/{name}", "200", "NodeBody", False),
    ("put", "/v1/nodes/{name}", "201", "NodeBody", False),
    ("put", "/v1/nodes/{name}", "200", "NodeBody", False),
    ("post", "/v1/nodes/{name}/cordon", "200", "NodeBody", False),
    ("post", "/v1/nodes/{name}/uncordon", "200", "NodeBody", False),
    ("get", "/v1/namespaces/{ns}/placements", "200", "PlacementSummary", True),
    ("post", "/v1/namespaces/{ns}/placements", "201", "PlacementBody", False),
    ("post", "/v1/namespaces/{ns}/placements", "200", "DryRunBody", False),
    ("get", "/v1/namespaces/{ns}/claims", "200", "ClaimBody", True),
    ("post", "/v1/namespaces/{ns}/claims", "201", "ClaimBody", False),
    ("patch", "/v1/namespaces/{ns}/claims/{claim_id}", "200", "ClaimBody", False),
    ("get", "/v1/events", "200", "EventBody", True),
    ("get", "/v1/admin/namespaces/{ns}/tokens", "200", "TokenBody", True),
    ("post", "/v1/admin/namespaces/{ns}/tokens", "201", "NewTokenBody", False),
    ("get", "/v1/rotation/status", "200", "PoolRotationBody", True),
    ("get", "/v1/admin/resources", "200", "ResourcesBody", False),
]


@pytest.fixture(scope="module")
def openapi() -> dict[str, Any]:
    app = create_app(build_container(Settings(api=ApiSettings(admin_token="t"))))
    document: dict[str, Any] = app.openapi()
    return document


def schema_of(hint: Any) -> dict[str, Any]:
    """The JSON schema pydantic writes for a field of type ``hint`` (as the client reads it)."""
    origin = get_origin(hint)
    if origin is types.UnionType or origin is Union:
        (inner,) = (a for a in get_args(hint) if a is not type(None))
        return {"anyOf": [schema_of(inner), {"type": "null"}]}
    if origin is list:
        return {"type": "array", "items": schema_of(get_args(hint)[0])}
    if origin is dict:
        value = get_args(hint)[1]
        return {
            "type": "object",
            "additionalProperties": True if value is Any else schema_of(value),
        }
    if origin is Literal:
        return {"type": "string", "enum": list(get_args(hint))}
    if isinstance(hint, type) and issubclass(hint, Wire):
        return {"$ref": f"#/components/schemas/{hint.__name__}"}
    if hint is datetime:
        return {"type": "string", "format": "date-time"}
    return {"type": {int: "integer", float: "number", str: "string", bool: "boolean"}[hint]}


def shape(schema: dict[str, Any]) -> dict[str, Any]:
    """A served field schema without its words (title, description, default)."""
    keep = {k: v for k, v in schema.items() if k not in {"title", "description", "default"}}
    if "anyOf" in keep:
        keep["anyOf"] = [shape(s) for s in keep["anyOf"]]
    if isinstance(keep.get("items"), dict):
        keep["items"] = shape(keep["items"])
    if isinstance(keep.get("additionalProperties"), dict):
        keep["additionalProperties"] = shape(keep["additionalProperties"])
    return keep


@pytest.mark.parametrize("body", BODIES, ids=lambda b: b.__name__)
def test_every_body_has_the_served_fields_types_and_required_set(
    body: type[Wire], openapi: dict[str, Any]
) -> None:
    served = openapi["components"]["schemas"][body.__name__]
    fields = hints(body)
    assert set(fields) == set(served["properties"]), body.__name__
    for name, hint in fields.items():
        assert schema_of(hint) == shape(served["properties"][name]), (body.__name__, name)
    defaulted = {n for n, s in served["properties"].items() if "default" in s}
    assert set(served.get("required", [])) == set(fields) - defaulted - _client_defaults(body)
    assert _client_defaults(body) <= set(fields) - set(served.get("required", []))


def _client_defaults(body: type[Wire]) -> set[str]:
    from dataclasses import MISSING, fields

    return {f.name for f in fields(body) if (f.default, f.default_factory) != (MISSING, MISSING)}


@pytest.mark.parametrize(("method", "path", "status", "body", "many"), READS)
def test_each_client_call_reads_the_body_its_route_answers(
    openapi: dict[str, Any], method: str, path: str, status: str, body: str, many: bool
) -> None:
    answer = openapi["paths"][path][method]["responses"][status]
    schema = answer["content"]["application/json"]["schema"]
    assert (schema.get("type") == "array") == many, (path, schema)
    assert schema.get("items", schema)["$ref"] == f"#/components/schemas/{body}"
    assert body in {b.__name__ for b in BODIES}


def test_a_body_reads_what_the_api_writes_and_keeps_it_for_json_output() -> None:
    from fleetgate.apps.api import schemas

    served = schemas.NodeBody(
        name="hv-1", pool="gold", labels={"a": "b"}, threads=8, memory_mb=1024, disk_gb=10,
        limits=schemas.Amounts(cpus=24, memory_mb=1024, disk_gb=10),
        used=schemas.Amounts(cpus=1, memory_mb=2, disk_gb=3), expected_demand=0.5,
        cpu_load_1=None, cpu_schedulable=4, schedulable=True,
        updated_at=datetime(2026, 12, 2, 4, 5, 6, 7, tzinfo=UTC), metrics_at=None,
    )  # fmt: skip
    wire = served.model_dump(mode="json")
    node = NodeBody.from_wire(wire)
    assert (node.name, node.used.cpus, node.limits.cpus, node.cpu_schedulable) == ("hv-1", 1, 24, 4)
    assert node.updated_at == served.updated_at and node.updated_at.tzname() == "UTC"
    assert node.model_dump(mode="json") == wire  # -o json prints the API's own object


@pytest.mark.parametrize(
    ("wire", "reason"),
    [
        ({"cpus": 1, "memory_mb": 2}, "Amounts.disk_gb: missing"),
        ({"cpus": "1", "memory_mb": 2, "disk_gb": 3}, "Amounts.cpus: expected int, got str"),
        ({"cpus": True, "memory_mb": 2, "disk_gb": 3}, "Amounts.cpus: expected int, got bool"),
        ([], "Amounts: expected an object, got list"),
    ],
)
def test_an_answer_of_another_shape_is_refused_naming_the_field(wire: Any, reason: str) -> None:
    with pytest.raises(WireError, match=reason):
        bodies.Amounts.from_wire(wire)


@given(
    at=st.datetimes(
        min_value=datetime(1970, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(None)
    ),
    minutes=st.integers(min_value=-23 * 60, max_value=23 * 60),
    zulu=st.booleans(),
)
def test_a_date_time_reads_as_pydantic_reads_it(at: datetime, minutes: int, zulu: bool) -> None:
    aware = at.replace(tzinfo=timezone(timedelta(minutes=minutes)))
    text = aware.isoformat()
    if zulu and minutes == 0:
        text = text.replace("+00:00", "Z")
    theirs, ours = TypeAdapter(datetime).validate_python(text), read_datetime(text)
    assert ours == theirs and ours.isoformat() == theirs.isoformat()
    assert ours.strftime("%Y-%m-%dT%H:%M%Z") == theirs.strftime("%Y-%m-%dT%H:%M%Z")
