"""A cap on request bodies, answered in the API's error shape.

No request of this API needs more than a mebibyte (the largest is a RotationPolicy). A declared
``Content-Length`` over the cap is refused before anything is read; a body without one (chunked)
is cut off once it passes the cap, from inside the route, so the usual handlers answer.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fleetgate.apps.api.errors import ApiError, error_response

#: The largest request body accepted, in bytes.
MAX_BODY_BYTES = 1 << 20


def too_large(max_bytes: int) -> ApiError:
    """413 for a body over ``max_bytes``."""
    return ApiError(413, "too_large", f"the request body exceeds {max_bytes} bytes")


class BodyLimit:
    """ASGI middleware refusing request bodies larger than ``max_bytes`` with a 413."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the declared length, then count what actually arrives."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await error_response(too_large(self.max_bytes))(scope, receive, send)
            return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise too_large(self.max_bytes)
            return message

        await self.app(scope, counted, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
