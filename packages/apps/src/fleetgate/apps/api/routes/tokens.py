"""Namespace tokens (admin only): create (the secret is shown once), list, revoke."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request, Response, status

from fleetgate.apps.api.auth import GuardedRoute, access, bearer_scheme, new_secret
from fleetgate.apps.api.deps import container_of
from fleetgate.apps.api.errors import not_found
from fleetgate.apps.api.schemas import ErrorBody, NamespaceName, NewTokenBody, ObjectId, TokenBody
from fleetgate.domain import tokens
from fleetgate.domain.tokens import ApiToken

router = APIRouter(
    prefix="/v1/admin/namespaces/{ns}/tokens",
    tags=["admin"],
    route_class=GuardedRoute,
    dependencies=[Depends(bearer_scheme)],
    responses={
        401: {"model": ErrorBody, "description": "No or bad token."},
        403: {"model": ErrorBody, "description": "Not the admin token."},
        404: {"model": ErrorBody, "description": "No such token in this namespace."},
        422: {"model": ErrorBody, "description": "Invalid request; names the field."},
        503: {"model": ErrorBody, "description": "The database did not answer."},
    },
)

Namespace = Annotated[NamespaceName, Path(description="The namespace the token acts in.")]


def _body(token: ApiToken) -> TokenBody:
    return TokenBody(
        id=token.id,
        namespace=token.namespace,
        created_at=token.created_at,
        revoked_at=token.revoked_at,
        active=token.active,
    )


@router.post(
    "",
    operation_id="create_token",
    status_code=status.HTTP_201_CREATED,
    response_model=NewTokenBody,
    responses={
        201: {
            "description": "The token, with its secret (shown this once).",
            "links": {
                "RevokeToken": {
                    "operationId": "revoke_token",
                    "parameters": {"ns": "$request.path.ns", "token_id": "$response.body#/id"},
                }
            },
        }
    },
)
@access(admin_only=True)
async def create_token(request: Request, ns: Namespace) -> NewTokenBody:
    """Create a token for ``ns``. The response carries its secret: the only time it is shown."""
    secret = new_secret()
    token = await container_of(request).token_service().create(ns, tokens.digest(secret))
    return NewTokenBody(**_body(token).model_dump(), secret=secret)


@router.get("", operation_id="list_tokens", response_model=list[TokenBody])
@access(admin_only=True)
async def list_tokens(request: Request, ns: Namespace) -> list[TokenBody]:
    """Every token of ``ns`` (never their secrets), revoked ones included."""
    return [_body(t) for t in await container_of(request).token_store().list_tokens(ns)]


@router.delete(
    "/{token_id}",
    operation_id="revoke_token",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
)
@access(admin_only=True)
async def revoke_token(request: Request, ns: Namespace, token_id: ObjectId) -> Response:
    """Revoke the token: it stops authenticating at once. A second revoke is 404."""
    if not await container_of(request).token_service().revoke(ns, token_id):
        raise not_found("token")
    return Response(status_code=status.HTTP_204_NO_CONTENT)
