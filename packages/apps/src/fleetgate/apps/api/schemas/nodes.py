"""Node bodies: what an operator declares and publishes, and a node as the ledger holds it."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, Field

from fleetgate.apps.api.schemas.common import (
    MAX_LABELS,
    MAX_LOAD,
    Amount,
    Amounts,
    LabelKey,
    LabelValue,
    NodeMemory,
    NodeThreads,
    PoolName,
    RequestBody,
    Threads,
)
from fleetgate.domain.capacity.model import NodeState


class NodePut(RequestBody):
    """A node's declared capacity, pool and labels."""

    threads: NodeThreads
    memory_mb: NodeMemory
    disk_gb: Amount
    pool: PoolName = ""
    labels: dict[LabelKey, LabelValue] = Field(
        default_factory=dict,
        max_length=MAX_LABELS,
        # pydantic states the key pattern as patternProperties; without this a key that does not
        # match would be unconstrained in the schema while the API refuses it.
        json_schema_extra={"additionalProperties": False},
    )


class MetricsPut(RequestBody):
    """A node's published metrics; ``null`` means unknown."""

    # strict: JSON true/false is not a load (lax pydantic would read false as 0.0)
    cpu_load_1: Annotated[float, Field(strict=True, ge=0, le=MAX_LOAD, allow_inf_nan=False)] | None
    cpu_schedulable: Threads | None


class NodeBody(BaseModel):
    """A node as the ledger holds it."""

    name: str
    pool: str
    labels: dict[str, str]
    threads: int
    memory_mb: int
    disk_gb: int
    limits: Amounts
    used: Amounts
    expected_demand: float
    cpu_load_1: float | None
    cpu_schedulable: int | None
    schedulable: bool
    updated_at: datetime
    metrics_at: datetime | None

    @classmethod
    def of(cls, node: NodeState) -> NodeBody:
        """From the domain value."""
        return cls(
            name=node.name,
            pool=node.pool,
            labels=dict(node.labels),
            threads=node.capacity.threads,
            memory_mb=node.capacity.memory_mb,
            disk_gb=node.capacity.disk_gb,
            limits=Amounts.of(node.limits),
            used=Amounts.of(node.used),
            expected_demand=node.expected_demand,
            cpu_load_1=node.metrics.cpu_load_1,
            cpu_schedulable=node.metrics.cpu_schedulable,
            schedulable=node.schedulable,
            updated_at=node.updated_at,
            metrics_at=node.metrics_at,
        )
