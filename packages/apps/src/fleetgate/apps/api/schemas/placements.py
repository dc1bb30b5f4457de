"""Placement bodies: the request, a placement as listed, and as admitted."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from fleetgate.apps.api.schemas.common import (
    Amount,
    CandidateBody,
    Cpus,
    DimensionBody,
    NodeName,
    PoolName,
    RequestBody,
    RequestId,
)
from fleetgate.domain.capacity.denials import DimensionDetail
from fleetgate.domain.capacity.dimensions import Resources
from fleetgate.domain.capacity.model import Placement


class PlacementCreate(RequestBody):
    """A placement request: its size, optionally a node to force, and an idempotency key."""

    cpus: Cpus
    memory_mb: Amount
    disk_gb: Amount
    node: NodeName | None = None
    pool: PoolName | None = None
    request_id: RequestId | None = None

    def resources(self) -> Resources:
        """The requested size."""
        return Resources(cpus=self.cpus, memory_mb=self.memory_mb, disk_gb=self.disk_gb)


class PlacementSummary(BaseModel):
    """A placement as listed: what it holds and where."""

    id: str
    namespace: str
    node: str
    cpus: int
    memory_mb: int
    disk_gb: int
    request_id: str | None
    claim_id: str | None
    admitted_at: datetime

    @classmethod
    def of(cls, p: Placement) -> PlacementSummary:
        """From the domain value."""
        return cls(
            id=p.id,
            namespace=p.namespace,
            node=p.node,
            cpus=p.resources.cpus,
            memory_mb=p.resources.memory_mb,
            disk_gb=p.resources.disk_gb,
            request_id=p.request_id,
            claim_id=p.claim_id,
            admitted_at=p.admitted_at,
        )


class PlacementBody(PlacementSummary):
    """A placement and how it was admitted: with the demand clause waived, over its claim."""

    demand_waived: bool
    over_claim: bool
    over_claim_dimensions: list[DimensionBody] = Field(default_factory=list)

    @classmethod
    def admitted(
        cls,
        p: Placement,
        *,
        demand_waived: bool,
        over_claim: tuple[DimensionDetail, ...],
    ) -> PlacementBody:
        """From the domain value and how its admission went."""
        return cls(
            **PlacementSummary.of(p).model_dump(),
            demand_waived=demand_waived,
            over_claim=bool(over_claim),
            over_claim_dimensions=[DimensionBody.of(d) for d in over_claim],
        )


class DryRunBody(BaseModel):
    """``?dry_run=true``: where the placement would land now, and the refusals on the way.

    Nothing was charged or recorded: there is no id, and a real request may land elsewhere if
    the fleet changes (or the ranking draws another node of equal weight).
    """

    dry_run: bool = True
    namespace: str
    node: str
    cpus: int
    memory_mb: int
    disk_gb: int
    demand_waived: bool
    over_claim: bool
    over_claim_dimensions: list[DimensionBody] = Field(default_factory=list)
    replayed: bool = Field(
        default=False, description="The request_id was used before: that placement is the answer."
    )
    refused: list[CandidateBody] = Field(
        default_factory=list, description="The candidates that would refuse before this node."
    )
