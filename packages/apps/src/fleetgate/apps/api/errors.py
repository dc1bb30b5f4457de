"""One JSON shape for every error the API returns: ``{"error": code, "message": text, ...}``.

Routes raise :class:`ApiError` (or let a domain refusal reach a mapping in the route module); the
handlers installed here turn it, FastAPI's validation errors and Starlette's routing errors into
that shape, so a client parses one body whatever went wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from fleetgate.apps.api.jsonbody import FastJSONResponse
from fleetgate.domain.capacity.errors import (
    LedgerUnavailable,
    NodeExists,
    NodeNotFound,
    PlacementNotFound,
)

_log = structlog.get_logger("fleetgate.api")

# Status codes Starlette raises itself (routing), mapped to our codes.
_HTTP_CODES = {
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "too_large",
    415: "unsupported_media_type",
}


class ApiError(Exception):
    """An error answer: HTTP ``status``, a stable machine ``code``, a human ``message``, details."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        headers: dict[str, str] | None = None,
        **details: Any,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers
        self.details = details

    def body(self) -> dict[str, Any]:
        """The JSON body: error, message, then the details."""
        return {"error": self.code, "message": self.message, **self.details}


def not_found(what: str) -> ApiError:
    """The one 404 for ``what``: the same body whether it is missing or in another namespace."""
    return ApiError(404, "not_found", f"{what} not found")


#: How a client passes a token: the answer to every 401 says it.
HOW_TO_PASS_A_TOKEN = "the fleetgate CLI sends the one given with --token or FLEETGATE_TOKEN"
NO_TOKEN_SENT = "none was sent"
UNKNOWN_TOKEN = "the one sent is not known here or was revoked"


def unauthorized(reason: str = NO_TOKEN_SENT) -> ApiError:
    """401 for a missing, malformed, unknown or revoked bearer token: ``reason`` says which of
    the two (none sent, or not known) and the message says how to pass one."""
    return ApiError(
        401,
        "unauthorized",
        f"a valid bearer token is required: {reason} ({HOW_TO_PASS_A_TOKEN})",
        headers={"WWW-Authenticate": "Bearer"},
    )


def forbidden(message: str) -> ApiError:
    """403: the token is valid but may not do this."""
    return ApiError(403, "forbidden", message)


def unavailable(message: str) -> ApiError:
    """503: a dependency (the database) did not answer; the client may retry."""
    return ApiError(503, "unavailable", message)


_LOCATIONS = {"body", "path", "query", "header", "cookie"}


def field_name(loc: tuple[int | str, ...] | list[int | str]) -> str:
    """``("body", "cpus")`` → ``cpus``; ``("path", "ns")`` → ``ns``; nested keys joined by dots."""
    parts = [str(p) for p in loc]
    if parts and parts[0] in _LOCATIONS:
        parts = parts[1:]
    return ".".join(parts) or "body"


def as_sent(
    loc: tuple[int | str, ...], kind: str, sent: Mapping[str, Any] | None
) -> tuple[int | str, ...]:
    """``loc`` cut down to the keys the client really sent (plus a missing field's own name).

    pydantic's location of an error inside a union (``int | None``) continues with the name of
    the union member that refused the value: ``expires_in_seconds.function-before[…]`` or
    ``cpus.none``. Those are validator internals, not fields: following the location through
    the data the client sent shows where the client's own keys end.
    """
    if sent is None or not loc or str(loc[0]) not in sent:
        return loc
    data: Any = sent[str(loc[0])]
    kept: list[int | str] = [loc[0]]
    last = len(loc) - 1
    for index, part in enumerate(loc[1:], start=1):
        indexed = isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data)
        if not indexed and not (isinstance(data, Mapping) and part in data):
            if kind == "missing" and isinstance(data, Mapping) and index == last:
                kept.append(part)  # a required field the client left out
                break
            if isinstance(data, Mapping) and isinstance(part, str) and index < last:
                continue  # a union member's name inside an object: the client's keys go on
            break
        data = data[part]
        kept.append(part)
    return tuple(kept)


def validation_error(
    errors: list[dict[str, Any]] | Any, sent: Mapping[str, Any] | None = None
) -> ApiError:
    """422 naming every invalid field once, as the client sent it, and why.

    ``errors`` is pydantic's error list; ``sent`` the request's data by location (``body``,
    ``query``, ``path``), to name fields as sent (see :func:`as_sent`). A union's "should be
    None" refusal is dropped when the field has a real reason (the client did not send null).
    """
    reasons: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for err in errors:
        loc = tuple(err.get("loc", ()))
        kind = str(err.get("type", ""))
        if kind == "json_invalid":  # loc holds a character offset, not a field
            loc = ("body",)
        loc = as_sent(loc, kind, sent)
        key = (field_name(loc), str(loc[0]) if loc else "body")
        reason = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        reasons.setdefault(key, [])
        if (kind, reason) not in reasons[key]:
            reasons[key].append((kind, reason))
    fields = []
    for (name, location), found in reasons.items():
        real = [reason for kind, reason in found if kind != "none_required"]
        fields.append(
            {
                "field": name,
                "location": location,
                "reason": "; ".join(real or [reason for _, reason in found]),
            }
        )
    message = "; ".join(f"{f['field']}: {f['reason']}" for f in fields) or "invalid request"
    return ApiError(422, "invalid_request", message, fields=fields)


def error_response(exc: ApiError) -> JSONResponse:
    """The response for an ApiError."""
    return FastJSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)


async def _api_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc)


def sent_data(request: Request, body: Any = None) -> dict[str, Any]:
    """The request's data by location, as :func:`validation_error` follows field names in it."""
    return {"body": body, "query": request.query_params, "path": request.path_params}


#: What a request body must be sent as (FastAPI, strict about it, reads a body as JSON only
#: under this type or another ``application/*+json``; never without a Content-Type).
JSON_MEDIA_TYPE = "application/json"


def _sent_as_json(request: Request) -> bool:
    """Whether the request's Content-Type is one FastAPI reads as JSON."""
    media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    return media == JSON_MEDIA_TYPE or (
        media.startswith("application/") and media.endswith("+json")
    )


def unsupported_media_type(request: Request) -> ApiError:
    """415 for a body sent as something other than JSON: says which type is needed."""
    sent = request.headers.get("content-type", "").partition(";")[0].strip()
    was = f"it was sent as {sent}" if sent else "it was sent without one"
    reason = f"must be JSON sent with Content-Type: {JSON_MEDIA_TYPE} ({was})"
    return ApiError(
        415,
        "unsupported_media_type",
        f"body: {reason}",
        fields=[{"field": "body", "location": "header", "reason": reason}],
    )


async def _request_validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    # A body sent as another type reaches the model as bytes ("should be a valid dictionary"):
    # the fault is the Content-Type, so the answer names it.
    if not _sent_as_json(request) and any(tuple(e.get("loc", ())) == ("body",) for e in errors):
        return error_response(unsupported_media_type(request))
    return error_response(validation_error(errors, sent_data(request, exc.body)))


def allowed_methods(request: Request) -> list[str]:
    """Every method some route serves at this path (Starlette names only the first route's).

    The app lists its routes in ``app.state.routes`` (FastAPI keeps included routers apart from
    ``app.routes``).
    """
    methods: set[str] = set()
    scope = {**request.scope, "method": "GET"}
    for route in getattr(request.app.state, "routes", request.app.router.routes):
        match, _ = route.matches(scope)
        if match is not Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    return sorted(methods)


async def _http_exception(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if isinstance(exc.__cause__, ApiError):  # e.g. the body cap, hit while FastAPI read the body
        return error_response(exc.__cause__)
    if exc.status_code == 400:
        # FastAPI's only 400: a body it could not read (not UTF-8, not JSON at all). That is an
        # invalid request like any other, so it gets the documented 422 naming the body.
        return error_response(
            ApiError(
                422,
                "invalid_request",
                "body: could not be read as JSON",
                fields=[{"field": "body", "location": "body", "reason": "not readable as JSON"}],
            )
        )
    code = _HTTP_CODES.get(exc.status_code, "error")
    message = exc.detail if isinstance(exc.detail, str) else code.replace("_", " ")
    headers = dict(getattr(exc, "headers", None) or {})
    if exc.status_code == 405:
        named = {m.strip() for m in headers.get("Allow", "").split(",") if m.strip()}
        headers["Allow"] = ", ".join(sorted(named | set(allowed_methods(request))))
    return JSONResponse(
        {"error": code, "message": message.lower() if code == "not_found" else message},
        status_code=exc.status_code,
        headers=headers or None,
    )


async def _ledger_error(_: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, NodeNotFound):
        return error_response(not_found("node"))
    if isinstance(exc, PlacementNotFound):
        return error_response(not_found("placement"))
    if isinstance(exc, NodeExists):
        return error_response(ApiError(409, "exists", str(exc)))
    # LedgerUnavailable: nothing changed, the client may retry.
    return error_response(unavailable(str(exc)))


async def _domain_value_error(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, ValidationError):  # a model we built ourselves: our bug, not the client's
        return await _unexpected(request, exc)
    # The schemas mirror the domain's rules, so this is reached only if they drift apart; the
    # domain's message already names the field ("cpus: must not be negative").
    _log.warning("domain refused a value the schema accepted", error=str(exc))
    field, _, reason = str(exc).partition(": ")
    return error_response(
        ApiError(
            422,
            "invalid_request",
            str(exc),
            fields=[{"field": field, "location": "body", "reason": reason or str(exc)}],
        )
    )


async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    # A bug, never a client's fault: log it with its traceback and answer in the same shape.
    _log.exception("unhandled error in the API", error=repr(exc))
    return JSONResponse(
        {"error": "internal_error", "message": "internal error; see the server log"},
        status_code=500,
    )


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers that give every error the one JSON shape."""
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RequestValidationError, _request_validation)
    app.add_exception_handler(StarletteHTTPException, _http_exception)
    for error in (NodeNotFound, PlacementNotFound, NodeExists, LedgerUnavailable):
        app.add_exception_handler(error, _ledger_error)
    app.add_exception_handler(ValueError, _domain_value_error)
    app.add_exception_handler(Exception, _unexpected)
