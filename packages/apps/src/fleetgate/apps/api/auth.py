"""Bearer-token authentication and per-route access rules.

Two kinds of token: the one admin token from configuration, and namespace tokens the admin creates
(stored as digests by the ``TokenStore``). Every ``/v1`` route declares who may call it with
:func:`access`; :class:`GuardedRoute` checks that declaration *before* FastAPI reads the body, so
the answer is always, in this order: 401 (no or bad token), 404 (a namespace token naming another
namespace: the same body as a missing resource), 403 (a valid token that may not do this), and only
then 422 for an invalid request.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import Request
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import request_params_to_args
from fastapi.routing import APIRoute
from fastapi.security import HTTPBearer
from starlette.responses import Response

from fleetgate.apps.api.errors import (
    UNKNOWN_TOKEN,
    ApiError,
    forbidden,
    sent_data,
    unauthorized,
    validation_error,
)
from fleetgate.domain import tokens
from fleetgate.domain.ports import TokenStore

#: Declares the bearer scheme in the OpenAPI document (the check itself is GuardedRoute's).
bearer_scheme = HTTPBearer(auto_error=False, description="The admin token or a namespace token.")

_ACCESS_ATTR = "__fleetgate_access__"
_LEAN_ATTR = "__fleetgate_lean__"
#: A route's lean handler: answers the plain, valid request itself, or None to leave it to
#: FastAPI's own handler (which then parses and validates as it always does, errors included).
LeanHandler = Callable[[Request], Awaitable[Response | None]]
_F = TypeVar("_F", bound=Callable[..., Any])
# A token longer than this is not one we issued; refuse it before hashing arbitrary input.
_MAX_TOKEN_LENGTH = 512


@dataclass(frozen=True)
class Principal:
    """Who is calling: the admin, or a namespace token acting only in ``namespace``."""

    admin: bool
    namespace: str | None = None
    token_id: str | None = None

    def may_see(self, namespace: str) -> bool:
        """True when this caller may see anything at all in ``namespace``."""
        return self.admin or self.namespace == namespace


@dataclass(frozen=True)
class Access:
    """A route's rule: whether only the admin may call it."""

    admin_only: bool


def access(*, admin_only: bool) -> Callable[[_F], _F]:
    """Declare who may call the decorated endpoint (see :func:`authorize` for the answers)."""

    def mark(endpoint: _F) -> _F:
        setattr(endpoint, _ACCESS_ATTR, Access(admin_only=admin_only))
        return endpoint

    return mark


def lean(handler: Callable[[_F], LeanHandler]) -> Callable[[_F], _F]:
    """Give the decorated endpoint a lean handler, made from the endpoint by ``handler``.

    For the hot path only: FastAPI solves a route's parameters and body on every request (its
    dependency machinery, the JSON decoded to a dict and then validated); a lean handler
    validates the raw body in one pass and calls the endpoint itself. Whatever it does not
    accept goes on to FastAPI's handler, so a refusal is always FastAPI's, word for word.
    """

    def mark(endpoint: _F) -> _F:
        setattr(endpoint, _LEAN_ATTR, handler(endpoint))
        return endpoint

    return mark


def new_secret() -> str:
    """A fresh namespace-token secret: the prefix and 256 random bits, URL-safe."""
    return tokens.SECRET_PREFIX + secrets.token_urlsafe(32)


def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None if absent or malformed."""
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > _MAX_TOKEN_LENGTH:
        return None
    return token


class Authenticator:
    """Turns a bearer token into a Principal, or refuses it."""

    def __init__(self, admin_token: str | None, store: TokenStore) -> None:
        self._admin_token = admin_token or None
        self._store = store

    async def authenticate(self, header: str | None) -> Principal:
        """The caller behind ``header``; raises the 401 ApiError for a missing or bad token."""
        token = bearer_token(header)
        if token is None:
            raise unauthorized()
        if self._admin_token is not None and tokens.same_secret(token, self._admin_token):
            return Principal(admin=True)
        # A store that cannot answer raises LedgerUnavailable: the error handlers make it a 503.
        stored = await self._store.token_by_digest(tokens.digest(token))
        if stored is None or not stored.active:
            raise unauthorized(UNKNOWN_TOKEN)
        return Principal(admin=False, namespace=stored.namespace, token_id=stored.id)


async def authorize(request: Request, rule: Access) -> Principal:
    """Apply ``rule`` to the request: 401, then 403 for another namespace, then 403 for an
    admin-only route (docs/api.md, "Who may do what")."""
    authenticator: Authenticator = request.app.state.authenticator
    principal = await authenticator.authenticate(request.headers.get("authorization"))
    namespace = request.path_params.get("ns")
    if namespace is not None and not principal.may_see(namespace):
        raise other_namespace(principal)
    if rule.admin_only and not principal.admin:
        raise forbidden("this operation needs the admin token")
    return principal


def other_namespace(principal: Principal) -> ApiError:
    """403 for a namespace token naming another namespace: the same answer whether that
    namespace holds anything or not, so it tells a stranger nothing, and it is true."""
    return forbidden(f"not allowed: this token acts only in namespace {principal.namespace}")


def _query_names(dependant: Dependant) -> frozenset[str]:
    """The query parameters a route (with its dependencies) declares."""
    return frozenset(param.alias for param in _query_fields(dependant))


def _query_fields(dependant: Dependant) -> list[Any]:
    """The query parameters a route (with its dependencies) declares, as FastAPI's fields."""
    fields = list(dependant.query_params)
    for sub in dependant.dependencies:
        fields += _query_fields(sub)
    return fields


def current_principal(request: Request) -> Principal:
    """Dependency: the caller GuardedRoute authenticated for this request."""
    principal: Principal = request.state.principal
    return principal


class GuardedRoute(APIRoute):
    """An APIRoute that refuses to exist without an access rule and enforces it before the body.

    FastAPI parses the JSON body before it runs any dependency, so a dependency cannot make a
    missing token win over a malformed body; wrapping the route handler can.
    """

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        rule = getattr(endpoint, _ACCESS_ATTR, None)
        if not isinstance(rule, Access):
            raise TypeError(f"route {path} must declare its access rule with @access(...)")
        self.rule = rule
        self.lean: LeanHandler | None = getattr(endpoint, _LEAN_ATTR, None)
        super().__init__(path, endpoint, **kwargs)
        self.query_names = _query_names(self.dependant)
        self.query_fields = _query_fields(self.dependant)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """The FastAPI handler, preceded by the access check."""
        handler = super().get_route_handler()
        rule, lean_handler = self.rule, self.lean

        async def guarded(request: Request) -> Response:
            request.state.principal = await authorize(request, rule)
            # A misspelt query parameter is refused like a misspelt body field, not ignored.
            unknown = sorted(set(request.query_params) - self.query_names)
            if unknown:
                # Name every offending query field: the declared ones' errors too, not only the
                # unknown names (the route is not run, so FastAPI would never report them).
                _, invalid = request_params_to_args(self.query_fields, request.query_params)
                raise validation_error(
                    [
                        *invalid,
                        *(
                            {"loc": ("query", name), "msg": "unknown query parameter"}
                            for name in unknown
                        ),
                    ],
                    sent_data(request),
                )
            if lean_handler is not None and (answer := await lean_handler(request)) is not None:
                return answer
            return await handler(request)

        return guarded


__all__ = [
    "Access",
    "ApiError",
    "Authenticator",
    "GuardedRoute",
    "LeanHandler",
    "Principal",
    "access",
    "bearer_scheme",
    "current_principal",
    "lean",
    "new_secret",
    "other_namespace",
]
