"""The audit trail: the admin reads everything; a namespace token reads its own namespace only."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request

from fleetgate.apps.api.auth import (
    GuardedRoute,
    Principal,
    access,
    bearer_scheme,
    current_principal,
    other_namespace,
)
from fleetgate.apps.api.deps import container_of
from fleetgate.apps.api.schemas import MAX_EVENTS, ErrorBody, EventBody, EventKind, NamespaceName

router = APIRouter(
    prefix="/v1/events",
    tags=["admin"],
    route_class=GuardedRoute,
    dependencies=[Depends(bearer_scheme)],
    responses={
        401: {"model": ErrorBody, "description": "No or bad token."},
        403: {"model": ErrorBody, "description": "Another namespace (for a namespace token)."},
        422: {"model": ErrorBody, "description": "Invalid request; names the field."},
        503: {"model": ErrorBody, "description": "The database did not answer."},
    },
)


@router.get("", operation_id="list_events", response_model=list[EventBody])
@access(admin_only=False)
async def list_events(
    request: Request,
    principal: Annotated[Principal, Depends(current_principal)],
    namespace: Annotated[NamespaceName | None, Query(description="Only this namespace.")] = None,
    kind: Annotated[EventKind | None, Query(description="Only this kind of event.")] = None,
    after_id: Annotated[int, Query(ge=0, le=(1 << 62), description="Events after this id.")] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_EVENTS)] = 100,
    order: Annotated[
        Literal["asc", "desc"],
        Query(description="``desc``: newest first (page on with before_id)."),
    ] = "asc",
    before_id: Annotated[
        int | None, Query(ge=1, le=(1 << 62), description="Events before this id.")
    ] = None,
) -> list[EventBody]:
    """Audit events, oldest first (``order=desc``: newest first). A namespace token sees only
    its namespace's events."""
    if not principal.admin:
        if namespace is not None and namespace != principal.namespace:
            raise other_namespace(principal)
        namespace = principal.namespace
    found = (
        await container_of(request)
        .ledger()
        .events(
            namespace=namespace,
            kind=kind,
            after_id=after_id,
            limit=limit,
            newest_first=order == "desc",
            before_id=before_id,
        )
    )
    return [EventBody.model_validate(e.as_dict()) for e in found]
