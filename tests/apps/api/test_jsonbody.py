"""The hot paths' JSON renderer writes the bytes Starlette's would, for every JSON-mode body."""

from __future__ import annotations

import math
from typing import Any

from fastapi.responses import JSONResponse
from hypothesis import given
from hypothesis import strategies as st

from fleetgate.apps.api.jsonbody import FastJSONResponse

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    # Floats the two encoders spell alike: Python's repr writes 1e+16 where pydantic-core
    # writes 1e16 (the same number); the API's figures are far inside this range.
    st.floats(-1e15, 1e15, allow_nan=False).filter(lambda x: x == 0 or abs(x) >= 1e-4),
    st.text(),
)
BODIES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


@given(BODIES)
def test_renders_what_starlette_renders(body: Any) -> None:
    assert FastJSONResponse(body).body == JSONResponse(body).body


def test_a_float_that_is_not_finite_is_null_not_invalid_json() -> None:
    assert FastJSONResponse({"x": math.inf}).body == b'{"x":null}'
