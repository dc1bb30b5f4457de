"""Liveness, readiness and Prometheus metrics: unauthenticated, for probes and scrapers."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST

from fleetgate.apps.api.deps import container_of
from fleetgate.apps.api.schemas import ErrorBody, HealthBody
from fleetgate.domain.ports import InventoryReader

router = APIRouter(tags=["health"])


@router.get("/healthz", operation_id="healthz", response_model=HealthBody)
async def healthz() -> HealthBody:
    """Always 200 while the process serves requests."""
    return HealthBody(status="ok")


@router.get(
    "/readyz",
    operation_id="readyz",
    response_model=HealthBody,
    responses={503: {"model": ErrorBody, "description": "The database does not answer."}},
)
async def readyz(request: Request) -> Response:
    """200 only when the database answers a query."""
    ledger: InventoryReader = container_of(request).ledger()
    try:
        await ledger.cluster()  # one indexed row: cheap, and proves the schema is there
    except Exception as exc:  # any failure to reach the database means "not ready"
        body = ErrorBody(error="unavailable", message=f"database unreachable: {type(exc).__name__}")
        return JSONResponse(body.model_dump(), status_code=503)
    return JSONResponse(HealthBody(status="ready").model_dump())


@router.get(
    "/metrics",
    operation_id="metrics",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}}}},
)
async def metrics(request: Request) -> Response:
    """Every series of this API (all workers' with ``--workers``) in the text exposition format."""
    return Response(request.app.state.api_metrics.exposition(), media_type=CONTENT_TYPE_LATEST)
