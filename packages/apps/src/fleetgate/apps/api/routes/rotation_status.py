"""``GET /v1/rotation/status``: every pool as the controller sees it, in a stable documented shape.

The controller runs elsewhere; this reads the cluster and derives each pool's report as a pass
would (``services/rotationstatus.py``), so the answer needs no controller and changes nothing.
"""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from fleetgate.apps.api.auth import GuardedRoute, access, bearer_scheme
from fleetgate.apps.api.deps import container_of
from fleetgate.apps.api.schemas import ErrorBody
from fleetgate.apps.services.rotationstatus import PoolStatus
from fleetgate.domain.durations import format_duration

router = APIRouter(
    prefix="/v1/rotation",
    tags=["rotation"],
    route_class=GuardedRoute,
    dependencies=[Depends(bearer_scheme)],
    responses={401: {"model": ErrorBody, "description": "No or bad token."}},
)


class PoolRotationBody(BaseModel):
    """One pool: who governs it, its window, A/G/C, what blocks a start, the rotation in flight."""

    pool: str
    nodes: int
    governance: str = Field(description="governed, ungoverned, conflict or invalid.")
    policy: str | None
    window_open: bool
    next_window_start: datetime | None
    next_window_end: datetime | None
    age_threshold: str | None = Field(description="A, as a duration (e.g. 46h43m).")
    age_threshold_seconds: float | None
    guaranteed_chances: int | None = Field(description="G.")
    throughput_capacity: int | None = Field(description="C: rotations per shortest window.")
    rotating: str | None = Field(description="The NodeClaim being rotated, if any.")
    reason: str | None = Field(description="Why no rotation starts now (a gate code, ...).")
    gate_until: datetime | None
    findings: list[str] = Field(description="The derivation's finding codes.")

    @classmethod
    def of(cls, status: PoolStatus) -> PoolRotationBody:
        """From a pool's derived report."""
        r, d = status.report, status.report.derivation
        start, end = status.next_window or (None, None)
        return cls(
            pool=status.pool,
            nodes=status.nodes,
            governance=r.governance.status.value,
            policy=r.governance.winner or None,
            window_open=r.window_active,
            next_window_start=start,
            next_window_end=end,
            age_threshold=None if d is None else format_duration(d.age_threshold),
            age_threshold_seconds=None if d is None else d.age_threshold.total_seconds(),
            guaranteed_chances=None if d is None else d.guaranteed_chances,
            throughput_capacity=None if d is None else d.capacity,
            rotating=r.anchor,
            reason=r.reason,
            gate_until=None if r.blocked is None else r.blocked.until,
            findings=[] if d is None else [f.code for f in d.findings],
        )


@router.get("/status", operation_id="rotation_status", response_model=list[PoolRotationBody])
@access(admin_only=False)
async def rotation_status(request: Request) -> list[PoolRotationBody]:
    """Every NodePool's rotation standing now, by name (read-only)."""
    found = await container_of(request).rotation_status().pools()
    return [PoolRotationBody.of(p) for p in found]
