"""``GET /v1/rotation/status``: every pool as the controller sees it, in a stable documented shape.

The controller runs elsewhere; this reads the cluster and derives each pool's report as a pass
would (``services/rotationstatus.py``), so the answer needs no controller and changes nothing.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from fleetgate.apps.api.auth import GuardedRoute, access, bearer_scheme
from fleetgate.apps.api.deps import container_of
from fleetgate.apps.api.schemas import ErrorBody, PoolRotationBody

router = APIRouter(
    prefix="/v1/rotation",
    tags=["rotation"],
    route_class=GuardedRoute,
    dependencies=[Depends(bearer_scheme)],
    responses={401: {"model": ErrorBody, "description": "No or bad token."}},
)


@router.get("/status", operation_id="rotation_status", response_model=list[PoolRotationBody])
@access(admin_only=False)
async def rotation_status(request: Request) -> list[PoolRotationBody]:
    """Every NodePool's rotation standing now, by name (read-only)."""
    found = await container_of(request).rotation_status().pools()
    return [PoolRotationBody.of(p) for p in found]
