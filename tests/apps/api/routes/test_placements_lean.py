"""The admission's lean handler: it accepts only what FastAPI's handler accepts, to the same values.

Whatever the lean handler does not accept goes on to FastAPI's own handler, so a refusal is
always FastAPI's. What must hold is the other side: a body the lean handler accepts (pydantic's
JSON mode over the raw bytes) is one FastAPI's decode-then-validate accepts as the same model.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from fleetgate.apps.api.auth import GuardedRoute
from fleetgate.apps.api.schemas import PlacementCreate
from tests.apps.api.conftest import Api
from tests.apps.api.routes.test_placements import NS, SMALL, URL

_FIELDS = ("cpus", "memory_mb", "disk_gb", "node", "pool", "request_id")
_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["1", "2.0", "hv-1", "a" * 300, "", " x", "0x10", "1e3"]),
    st.lists(st.integers(0, 3), max_size=2),
)
_OBJECTS = st.dictionaries(st.sampled_from([*_FIELDS, "extra", "CPUS"]), _VALUES, max_size=7)
# Texts json.dumps would never write: a number's other spellings, NaN, duplicate keys.
_ODD = st.sampled_from(
    [
        '{"cpus": 1.0, "memory_mb": 1, "disk_gb": 1}',
        '{"cpus": 1e0, "memory_mb": 1, "disk_gb": 1}',
        '{"cpus": NaN, "memory_mb": 1, "disk_gb": 1}',
        '{"cpus": 1, "cpus": 2, "memory_mb": 1, "disk_gb": 1}',
        '{"cpus": 1, "memory_mb": 1, "disk_gb": 1, "request_id": "\\u0000"}',
        '{"cpus": true, "memory_mb": 1, "disk_gb": 1}',
        '{"cpus": "1", "memory_mb": 1, "disk_gb": 1}',
        ' {"cpus": 1, "memory_mb": 1, "disk_gb": 1} ',
        '[{"cpus": 1, "memory_mb": 1, "disk_gb": 1}]',
    ]
)


def _fastapi_accepts(raw: str) -> PlacementCreate | None:
    # FastAPI decodes the body with the standard library, then validates the object.
    try:
        return PlacementCreate.model_validate(json.loads(raw))
    except (ValueError, ValidationError):
        return None


@given(st.one_of(_OBJECTS.map(json.dumps), _ODD))
def test_a_body_the_lean_handler_accepts_fastapi_accepts_as_the_same_model(raw: str) -> None:
    try:
        lean = PlacementCreate.model_validate_json(raw)
    except ValidationError:
        return  # left to FastAPI, whatever it answers
    assert _fastapi_accepts(raw) == lean


def test_the_admission_route_has_the_lean_handler() -> None:
    from fleetgate.apps.api.routes.placements import router

    posts = [r for r in router.routes if isinstance(r, GuardedRoute) and "POST" in r.methods]
    assert [r.name for r in posts if r.lean is not None] == ["create_placement"]


@pytest.mark.parametrize(
    ("content_type", "query"),
    [("application/json", ""), ("application/json; charset=utf-8", ""), (None, "?dry_run=false")],
)
async def test_lean_or_not_a_plain_admission_answers_the_same(
    api: Api, content_type: str | None, query: str
) -> None:
    await api.node("hv-1")
    team = await api.token(NS)
    headers: dict[str, Any] = {**team, "content-type": content_type or "application/json"}
    r = await api.client.post(URL + query, content=json.dumps(SMALL), headers=headers)
    assert r.status_code == 201, r.text
    assert {k: r.json()[k] for k in SMALL} == SMALL


async def test_a_body_the_lean_handler_refuses_gets_fastapis_422(api: Api) -> None:
    team = await api.token(NS)
    r = await api.client.post(
        URL,
        content=b'{"cpus": -1, "memory_mb": 1}',
        headers={**team, "content-type": "application/json"},
    )
    assert r.status_code == 422
    fields = {f["field"] for f in r.json()["fields"]}
    assert fields == {"cpus", "disk_gb"}
