"""Placements of a namespace: admit (201, or 507/403 with why), list, read, release.

A repeated ``request_id`` answers with the first result and admits nothing; the answer carries
``Idempotent-Replayed: true``. The same id with a different size (or forced node) is 409
``request_id_reused`` naming the fields that differ, never the first answer. The service reads
the first admission's waiver and over-claim facts back from its audit events, so the replayed
body is the first body.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request, Response, status
from fastapi.responses import JSONResponse
from pydantic import TypeAdapter, ValidationError

from fleetgate.apps.api.auth import GuardedRoute, LeanHandler, access, bearer_scheme, lean
from fleetgate.apps.api.deps import container_of
from fleetgate.apps.api.errors import ApiError, not_found
from fleetgate.apps.api.jsonbody import FastJSONResponse
from fleetgate.apps.api.observe import observed_admission
from fleetgate.apps.api.paging import DEFAULT_PAGE, LINK_HEADER, PageSize, link_next_page
from fleetgate.apps.api.schemas import (
    UNSUPPORTED_MEDIA_TYPE,
    CandidateBody,
    CapacityRefusal,
    DimensionBody,
    DryRunBody,
    ErrorBody,
    NamespaceName,
    ObjectId,
    PlacementBody,
    PlacementCreate,
    PlacementSummary,
)
from fleetgate.apps.services.placement import PlaceOutcome, RequestIdReused
from fleetgate.domain.capacity.claims import ClaimEnforcement
from fleetgate.domain.capacity.denials import Stage
from fleetgate.domain.capacity.model import Placement, PlacementRequest

if TYPE_CHECKING:
    from fleetgate.apps.container import Container

router = APIRouter(
    prefix="/v1/namespaces/{ns}/placements",
    tags=["placements"],
    route_class=GuardedRoute,
    responses={
        401: {"model": ErrorBody, "description": "No or bad token."},
        403: {"model": ErrorBody, "description": "A namespace token naming another namespace."},
        404: {"model": ErrorBody, "description": "No such placement in this namespace."},
        422: {"model": ErrorBody, "description": "Invalid request; names the field."},
        503: {"model": ErrorBody, "description": "The database did not answer; retry."},
    },
)

Namespace = Annotated[NamespaceName, Path(description="The namespace that owns the placement.")]
PlacementId = Annotated[ObjectId, Path(description="The placement's id.")]

# The token is checked by GuardedRoute (authorize), never by ``bearer_scheme``, which only puts
# the security scheme in the OpenAPI document. As a dependency it is solved on every request, so
# the admission route, the hot path, names the scheme in its document instead (the same entry).
_SECURED = [Depends(bearer_scheme)]
_SECURITY: dict[str, Any] = {"security": [{bearer_scheme.scheme_name: []}]}

_LINKS = {
    "GetPlacement": {
        "operationId": "get_placement",
        "parameters": {"ns": "$request.path.ns", "placement_id": "$response.body#/id"},
    },
    "ReleasePlacement": {
        "operationId": "release_placement",
        "parameters": {"ns": "$request.path.ns", "placement_id": "$response.body#/id"},
    },
}


async def _with_facts(request: Request, placement: Placement) -> PlacementBody:
    """The placement with how its admission went (the service reads its recorded facts)."""
    facts = await container_of(request).placement_service().facts(placement)
    return PlacementBody.admitted(
        placement, demand_waived=facts.demand_waived, over_claim=facts.over_claim
    )


def _refusal(outcome: PlaceOutcome, hard_claims: bool) -> ApiError:
    """403 when a hard claim refused (the namespace side, same for every node), else 507."""
    denials = outcome.denials
    if hard_claims and denials and all(d.stage is Stage.CLAIM for d in denials.values()):
        first = next(iter(denials.values()))
        return ApiError(
            403,
            "claim_exceeded",
            "the namespace's capacity claim does not allow this placement",
            dimensions=[DimensionBody.wire(d) for d in first.dimensions if d.exceeded],
            audit_subject=outcome.subject,
        )
    candidates = [CandidateBody.wire(node, denial) for node, denial in denials.items()]
    n = len(candidates)
    return ApiError(
        507,
        "insufficient_capacity",
        f"no node had capacity for this placement, {n} candidate(s) refused it",
        candidates=candidates,
        audit_subject=outcome.subject,
    )


def _hard_claims(container: Container) -> bool:
    """Whether a claim's refusal is a 403 (hard enforcement) rather than part of a 507."""
    return container.settings().claims.enforcement is ClaimEnforcement.HARD


def _reused(exc: RequestIdReused) -> ApiError:
    """409: the request id already made a different placement (an idempotency key's rule)."""
    return ApiError(
        409,
        "request_id_reused",
        str(exc),
        request_id=exc.placement.request_id,
        placement_id=exc.placement.id,
        fields=list(exc.fields),
    )


async def _dry_run(container: Container, placement: PlacementRequest) -> JSONResponse:
    """The dry run's answer: 200 with the node, or the refusal a real request would get."""
    result = await container.dry_run().place(placement)
    found = result.trial
    if found.node is None:
        outcome = PlaceOutcome("", None, found.denials, found.candidates)
        refusal = _refusal(outcome, _hard_claims(container))
        refusal.details.pop("audit_subject", None)  # nothing was recorded to read back
        refusal.details["dry_run"] = True
        raise refusal
    x = placement.resources
    over = found.claim_over_limit
    body = DryRunBody(
        namespace=placement.namespace,
        node=found.node,
        cpus=x.cpus if result.replay is None else result.replay.resources.cpus,
        memory_mb=x.memory_mb if result.replay is None else result.replay.resources.memory_mb,
        disk_gb=x.disk_gb if result.replay is None else result.replay.resources.disk_gb,
        demand_waived=found.waived,
        over_claim=bool(over),
        over_claim_dimensions=[DimensionBody.of(d) for d in over],
        replayed=result.replay is not None,
        refused=[CandidateBody.of(n, d) for n, d in found.denials.items()],
    )
    return JSONResponse(body.model_dump(mode="json"))


_NAMESPACE: TypeAdapter[str] = TypeAdapter(NamespaceName)


def _lean_create(endpoint: Callable[..., Awaitable[Any]]) -> LeanHandler:
    """``create_placement`` for a plain JSON admission whose name and body validate.

    The body is validated from its bytes in one pass (pydantic's JSON mode, which accepts only
    what FastAPI's decode-then-validate accepts, to the same values: a test holds them so). A
    dry run, another content type, or anything that does not validate is left to FastAPI.
    """

    async def handle(request: Request) -> Response | None:
        if request.query_params or request.headers.get("content-type") != "application/json":
            return None
        try:
            ns = _NAMESPACE.validate_python(request.path_params["ns"])
            body = PlacementCreate.model_validate_json(await request.body())
        except ValidationError:
            return None
        answer = await endpoint(request, ns, body)
        assert isinstance(answer, Response)  # only a dry run answers with a model
        return answer

    return handle


@router.post(
    "",
    operation_id="create_placement",
    status_code=status.HTTP_201_CREATED,
    response_model=PlacementBody,
    responses={
        200: {"model": DryRunBody, "description": "``dry_run=true``: where it would land."},
        201: {"description": "Admitted (or replayed: see Idempotent-Replayed).", "links": _LINKS},
        403: {
            "model": ErrorBody,
            "description": "A hard claim refused it (``claim_exceeded``, with ``dimensions``: "
            "see DimensionsRefusal), or a namespace token named another namespace.",
        },
        409: {"model": ErrorBody, "description": "request_id already made a different one."},
        507: {"model": CapacityRefusal, "description": "No candidate node had room."},
        **UNSUPPORTED_MEDIA_TYPE,
    },
    openapi_extra=_SECURITY,
)
@access(admin_only=False)
@lean(_lean_create)
async def create_placement(
    request: Request,
    ns: Namespace,
    body: PlacementCreate,
    dry_run: Annotated[
        bool,
        Query(description="Only say where it would land and why others refuse; change nothing."),
    ] = False,
) -> PlacementBody | JSONResponse:
    """Admit a placement on the best node with room (or on ``node``), or explain the refusal.

    With ``dry_run=true`` nothing is charged or recorded: 200 names the node it would land on,
    and a refusal has the same 507/403 body as a real one (with ``dry_run: true``, no
    ``audit_subject``).
    """
    container = container_of(request)
    placement_request = PlacementRequest(
        namespace=ns,
        resources=body.resources(),
        request_id=body.request_id,
        node=body.node,
        pool=body.pool,
    )
    try:
        if dry_run:
            return await _dry_run(container, placement_request)
        outcome = await observed_admission(
            request.app.state.api_metrics,
            container.placement_service().place(placement_request),
            ns,
        )
    except RequestIdReused as exc:
        raise _reused(exc) from exc
    if outcome.placement is None:
        raise _refusal(outcome, _hard_claims(container))
    headers = {"Location": f"/v1/namespaces/{ns}/placements/{outcome.placement.id}"}
    if outcome.replayed:
        headers["Idempotent-Replayed"] = "true"
    placed = PlacementBody.admitted(
        outcome.placement, demand_waived=outcome.waived, over_claim=outcome.claim_over_limit
    )
    # Answered as built: returned as a model, the body would be validated a second time against
    # the response model and walked by the JSON encoder, on every placement.
    return FastJSONResponse(placed.model_dump(mode="json"), status.HTTP_201_CREATED, headers)


@router.get(
    "",
    operation_id="list_placements",
    dependencies=_SECURED,
    response_model=list[PlacementSummary],
    responses={200: {"description": "One page of placements, by id.", "headers": LINK_HEADER}},
)
@access(admin_only=False)
async def list_placements(
    request: Request,
    response: Response,
    ns: Namespace,
    limit: PageSize = DEFAULT_PAGE,
    after: Annotated[
        ObjectId | None, Query(description="The last id of the previous page.")
    ] = None,
) -> list[PlacementSummary]:
    """The namespace's placements by id, one page at a time (see the ``Link`` header)."""
    found = await container_of(request).ledger().placements(ns, after=after, limit=limit)
    link_next_page(request, response, limit, [p.id for p in found])
    return [PlacementSummary.of(p) for p in found]


@router.get(
    "/{placement_id}",
    operation_id="get_placement",
    response_model=PlacementBody,
    dependencies=_SECURED,
)
@access(admin_only=False)
async def get_placement(
    request: Request, ns: Namespace, placement_id: PlacementId
) -> PlacementBody:
    """One placement of the namespace."""
    placement = await container_of(request).ledger().placement(placement_id)
    if placement is None or placement.namespace != ns:
        raise not_found("placement")
    return await _with_facts(request, placement)


@router.delete(
    "/{placement_id}",
    operation_id="release_placement",
    dependencies=_SECURED,
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
)
@access(admin_only=False)
async def release_placement(request: Request, ns: Namespace, placement_id: PlacementId) -> Response:
    """Release the placement and credit its charges back; a second release is 404."""
    result = await container_of(request).placement_service().release(ns, placement_id)
    if not result.released:
        raise not_found("placement")
    return Response(status_code=status.HTTP_204_NO_CONTENT)
