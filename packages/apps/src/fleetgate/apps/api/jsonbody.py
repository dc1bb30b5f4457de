"""The JSON response of the hot paths: an admission's 201 and every error body (a 507 above all).

Starlette renders with the standard library's encoder; pydantic-core's, already a dependency,
renders the same data about three times faster, and a 507 on a full fleet carries every
candidate's refusal, dimension by dimension. The bytes are the same JSON (compact, UTF-8); the
one difference is a float that is not finite, which Starlette refuses with an error and this
renders as ``null``: no body built here holds one (every figure is validated or counted).
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse
from pydantic_core import to_json


class FastJSONResponse(JSONResponse):
    """A ``JSONResponse`` rendered by pydantic-core. Content must already be JSON-mode data."""

    def render(self, content: Any) -> bytes:
        """Compact UTF-8 JSON of ``content``."""
        return to_json(content, inf_nan_mode="null")
