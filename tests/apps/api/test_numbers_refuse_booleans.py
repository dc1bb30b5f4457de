"""No request body takes a boolean where the OpenAPI document says number or integer.

Python's ``bool`` is an ``int``, so a lax field quietly reads ``true`` as 1 (as
``PUT /v1/nodes/{name}/metrics`` once read ``{"cpu_load_1": false}``). This walks every route's
request body model, and every model nested in one, and tries ``true`` and ``false`` on each
field the document declares numeric.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError

from fleetgate.apps.api.app import create_app
from fleetgate.apps.container import build_container
from fleetgate.apps.settings import Settings

NUMERIC = {"number", "integer"}


def _models(annotation: Any) -> Iterator[type[BaseModel]]:
    """Every pydantic model in ``annotation`` (through unions, lists, dicts, Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        for field in annotation.model_fields.values():
            yield from _models(field.annotation)
    for arg in typing.get_args(annotation):
        yield from _models(arg)


def _numeric(schema: dict[str, Any]) -> bool:
    """Whether a property's schema admits a number (directly or as one branch of a union)."""
    branches = [schema, *schema.get("anyOf", []), *schema.get("oneOf", [])]
    return any(branch.get("type") in NUMERIC for branch in branches)


def _numeric_fields() -> list[tuple[type[BaseModel], str]]:
    app = create_app(build_container(Settings(database_url="sqlite+aiosqlite:///:memory:")))
    found: dict[tuple[type[BaseModel], str], None] = {}
    for route in app.state.routes:  # every /v1 route (create_app keeps the list)
        if not isinstance(route, APIRoute) or route.body_field is None:
            continue
        for model in _models(route.body_field.field_info.annotation):
            properties = model.model_json_schema(by_alias=True).get("properties", {})
            for name, field in model.model_fields.items():
                if _numeric(properties.get(field.alias or name, {})):
                    found[(model, name)] = None
    return list(found)


FIELDS = _numeric_fields()


def test_the_walk_finds_the_numeric_fields() -> None:
    names = {f"{model.__name__}.{name}" for model, name in FIELDS}
    assert "MetricsPut.cpu_load_1" in names and "MetricsPut.cpu_schedulable" in names
    assert any(n.endswith(".cpus") for n in names) and any(n.endswith(".threads") for n in names)


@pytest.mark.parametrize(("model", "name"), FIELDS, ids=[f"{m.__name__}.{n}" for m, n in FIELDS])
@pytest.mark.parametrize("value", [True, False])
def test_a_numeric_field_refuses_a_boolean(model: type[BaseModel], name: str, value: bool) -> None:
    with pytest.raises(ValidationError) as refused:
        model.__pydantic_validator__.validate_assignment(model.model_construct(), name, value)
    assert refused.value.errors()[0]["loc"][0] == name


def test_the_check_sees_a_lax_field() -> None:
    class Lax(BaseModel):
        n: int

    # The assignment check above would fail on a field like this one (bool is accepted as 1).
    assert Lax.__pydantic_validator__.validate_assignment(Lax.model_construct(), "n", True).n == 1
