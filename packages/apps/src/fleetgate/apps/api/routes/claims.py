"""Capacity claims of a namespace: the admin writes them, the namespace's token reads its own.

Refusals map as the capacity spec (6.8) says, in the one error shape: ``exists``,
``below_usage`` and ``not_active`` are 409; ``capacity`` is 507 with the dimensions that refused;
``no_cluster_capacity`` and ``conflict`` are 503 (retry later); ``not_found`` is 404.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request, Response, status

from fleetgate.apps.api.auth import GuardedRoute, access, bearer_scheme
from fleetgate.apps.api.deps import container_of
from fleetgate.apps.api.errors import ApiError, not_found
from fleetgate.apps.api.schemas import (
    UNSUPPORTED_MEDIA_TYPE,
    ClaimBody,
    ClaimCreate,
    ClaimPatch,
    DimensionBody,
    DimensionsRefusal,
    ErrorBody,
    NamespaceName,
    ObjectId,
)
from fleetgate.domain.capacity.claims import ClaimOutcome, ClaimRefusal, ClaimRequest, RefusalReason
from fleetgate.domain.capacity.dimensions import Resources

router = APIRouter(
    prefix="/v1/namespaces/{ns}/claims",
    tags=["claims"],
    route_class=GuardedRoute,
    dependencies=[Depends(bearer_scheme)],
    responses={
        401: {"model": ErrorBody, "description": "No or bad token."},
        403: {
            "model": ErrorBody,
            "description": "A namespace token naming another namespace (or an admin-only write).",
        },
        404: {"model": ErrorBody, "description": "No such claim in this namespace."},
        422: {"model": ErrorBody, "description": "Invalid request; names the field."},
        503: {"model": ErrorBody, "description": "The database or the cluster row: retry."},
    },
)

Namespace = Annotated[NamespaceName, Path(description="The namespace the claim reserves for.")]
ClaimId = Annotated[ObjectId, Path(description="The claim's id.")]

_WRITE_ERRORS: dict[int | str, dict[str, object]] = {
    403: {"model": ErrorBody, "description": "Claims are written with the admin token."},
    409: {"model": ErrorBody, "description": "exists, below_usage or not_active."},
    507: {"model": DimensionsRefusal, "description": "The cluster cannot promise it."},
}
_STATUS = {
    RefusalReason.EXISTS: 409,
    RefusalReason.BELOW_USAGE: 409,
    RefusalReason.NOT_ACTIVE: 409,
    RefusalReason.NOT_FOUND: 404,
    RefusalReason.CAPACITY: 507,
    RefusalReason.NO_CLUSTER_CAPACITY: 503,
    RefusalReason.CONFLICT: 503,
}
_LINK_PARAMETERS = {"ns": "$request.path.ns", "claim_id": "$response.body#/id"}
_LINKS = {
    "GetClaim": {"operationId": "get_claim", "parameters": _LINK_PARAMETERS},
    "UpdateClaim": {"operationId": "update_claim", "parameters": _LINK_PARAMETERS},
    "DeleteClaim": {"operationId": "delete_claim", "parameters": _LINK_PARAMETERS},
}


def refusal_error(refusal: ClaimRefusal) -> ApiError:
    """The HTTP answer for a refused claim operation (capacity spec 6.8)."""
    if refusal.reason is RefusalReason.NOT_FOUND:
        return not_found("claim")
    details: dict[str, Any] = {}
    if refusal.denial is not None:
        shown = [d for d in refusal.denial.dimensions if d.exceeded] or refusal.denial.dimensions
        details["dimensions"] = [DimensionBody.of(d).model_dump() for d in shown]
    code = "insufficient_capacity" if refusal.reason is RefusalReason.CAPACITY else refusal.reason
    return ApiError(_STATUS[refusal.reason], str(code), refusal.message, **details)


def _applied(outcome: ClaimOutcome) -> ClaimBody:
    if outcome.refusal is not None or outcome.claim is None:
        raise refusal_error(outcome.refusal or ClaimRefusal(RefusalReason.CONFLICT, "no claim"))
    return ClaimBody.of(outcome.claim)


@router.get("", operation_id="list_claims", response_model=list[ClaimBody])
@access(admin_only=False)
async def list_claims(request: Request, ns: Namespace) -> list[ClaimBody]:
    """The namespace's claims, expired ones included, oldest first."""
    return [ClaimBody.of(c) for c in await container_of(request).claim_service().claims(ns)]


@router.post(
    "",
    operation_id="create_claim",
    status_code=status.HTTP_201_CREATED,
    response_model=ClaimBody,
    responses={
        201: {"description": "The claim, now active.", "links": _LINKS},
        **_WRITE_ERRORS,
        **UNSUPPORTED_MEDIA_TYPE,
    },
)
@access(admin_only=True)
async def create_claim(
    request: Request, response: Response, ns: Namespace, body: ClaimCreate
) -> ClaimBody:
    """Reserve capacity for the namespace; its current usage moves into the claim."""
    container = container_of(request)
    claim_request = ClaimRequest(
        namespace=ns,
        limit=Resources(cpus=body.cpus, memory_mb=body.memory_mb, disk_gb=body.disk_gb),
        expires_in_seconds=body.expires_in(container.clock().now()),
    )
    created = _applied(await container.claim_service().create(claim_request))
    response.headers["Location"] = f"/v1/namespaces/{ns}/claims/{created.id}"
    return created


@router.get("/{claim_id}", operation_id="get_claim", response_model=ClaimBody)
@access(admin_only=False)
async def get_claim(request: Request, ns: Namespace, claim_id: ClaimId) -> ClaimBody:
    """One claim of the namespace, with its effective state."""
    claim = await container_of(request).claim_service().claim(claim_id, namespace=ns)
    if claim is None:
        raise not_found("claim")
    return ClaimBody.of(claim)


@router.patch(
    "/{claim_id}",
    operation_id="update_claim",
    response_model=ClaimBody,
    responses={
        200: {"description": "The claim as updated.", "links": _LINKS},
        **_WRITE_ERRORS,
        **UNSUPPORTED_MEDIA_TYPE,
    },
)
@access(admin_only=True)
async def update_claim(
    request: Request, ns: Namespace, claim_id: ClaimId, body: ClaimPatch
) -> ClaimBody:
    """Change only the fields given: grow (an admission), shrink (down to usage), re-date."""
    container = container_of(request)
    update = body.update(container.clock().now())
    return _applied(await container.claim_service().update(claim_id, update, namespace=ns))


@router.delete(
    "/{claim_id}",
    operation_id="delete_claim",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses={403: _WRITE_ERRORS[403]},
)
@access(admin_only=True)
async def delete_claim(request: Request, ns: Namespace, claim_id: ClaimId) -> Response:
    """Delete the claim; its namespace's usage goes back to the unclaimed side. Twice: 404."""
    deletion = await container_of(request).claim_service().delete(claim_id, namespace=ns)
    if not deletion.deleted:
        raise not_found("claim")
    return Response(status_code=status.HTTP_204_NO_CONTENT)
