"""Admin bodies: tokens, audit events, the resources view and a reconcile pass's report."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel

from fleetgate.apps.api.schemas.claims import ClaimBody
from fleetgate.apps.api.schemas.common import Amounts, DimensionBody
from fleetgate.domain.capacity.reconcile import PassReport

# --- tokens ---------------------------------------------------------------------------------------


class TokenBody(BaseModel):
    """A namespace token, without its secret."""

    id: str
    namespace: str
    created_at: datetime
    revoked_at: datetime | None
    active: bool


class NewTokenBody(TokenBody):
    """A token just created: ``secret`` is shown this once and never again."""

    secret: str


# --- events ---------------------------------------------------------------------------------------


class EventBody(BaseModel):
    """One audit event."""

    id: int
    at: datetime
    kind: str
    subject: str
    namespace: str | None
    level: str
    data: dict[str, Any]


# --- admin ----------------------------------------------------------------------------------------


class ClusterResources(BaseModel):
    """The cluster row; ``unclaimed`` is the unclaimed side as the cluster guard sees it."""

    total: Amounts
    claimed: Amounts
    unclaimed_used: Amounts
    unclaimed: list[DimensionBody]
    updated_at: datetime


class NodeResources(BaseModel):
    """A node's counters; ``dimensions`` are its guard's, demand included when it applies."""

    name: str
    pool: str
    schedulable: bool
    limits: Amounts
    used: Amounts
    expected_demand: float
    cpu_load_1: float | None
    cpu_schedulable: int | None
    dimensions: list[DimensionBody]


class ResourcesBody(BaseModel):
    """``GET /v1/admin/resources``."""

    cluster: ClusterResources
    nodes: list[NodeResources]


# --- reconcile ------------------------------------------------------------------------------------


class SummaryBody(BaseModel):
    """A pass in a line: counts, summed absolute drift, expiries, duration."""

    nodes: int
    drifted_nodes: int
    drift: Amounts
    claims_expired: int
    drifted_claims: int
    cluster_drifted: bool
    reattributed: int
    duration_seconds: float
    clean: bool


class NodeDriftBody(BaseModel):
    """A node after the pass: recomputed counters, what was stored, the signed drift."""

    name: str
    limits: Amounts
    used: Amounts
    stored_used: Amounts
    drift: dict[str, int]
    expected_demand: float
    stored_expected_demand: float


class ClaimDriftBody(BaseModel):
    """An active claim after the pass."""

    id: str
    namespace: str
    limit: Amounts
    used: Amounts
    stored_used: Amounts
    drift: dict[str, int]


class ClusterDriftBody(BaseModel):
    """The cluster row after the pass, with the signed drift of each of its three sums."""

    total: Amounts
    claimed: Amounts
    unclaimed_used: Amounts
    drift: dict[str, dict[str, int]]
    created: bool


class ReconcileBody(BaseModel):
    """``POST /v1/admin/reconcile``: the pass's report."""

    at: datetime
    summary: SummaryBody
    nodes: list[NodeDriftBody]
    claims: list[ClaimDriftBody]
    expired_claims: list[ClaimBody]
    cluster: ClusterDriftBody

    @classmethod
    def of(cls, report: PassReport) -> ReconcileBody:
        """From the domain's report."""
        r = report.reconciliation
        s = report.summary
        return cls(
            at=r.at,
            summary=SummaryBody(
                nodes=s.nodes,
                drifted_nodes=s.drifted_nodes,
                drift=Amounts.of(s.drift),
                claims_expired=s.claims_expired,
                drifted_claims=s.drifted_claims,
                cluster_drifted=s.cluster_drifted,
                reattributed=s.reattributed,
                duration_seconds=s.duration_seconds,
                clean=s.clean,
            ),
            nodes=[
                NodeDriftBody(
                    name=n.name,
                    limits=Amounts.of(n.limits),
                    used=Amounts.of(n.used),
                    stored_used=Amounts.of(n.stored_used),
                    drift=n.drift.as_dict(),
                    expected_demand=n.expected_demand,
                    stored_expected_demand=n.stored_expected_demand,
                )
                for n in r.nodes
            ],
            claims=[
                ClaimDriftBody(
                    id=c.id,
                    namespace=c.namespace,
                    limit=Amounts.of(c.limit),
                    used=Amounts.of(c.used),
                    stored_used=Amounts.of(c.stored_used),
                    drift=c.drift.as_dict(),
                )
                for c in r.claims
            ],
            expired_claims=[ClaimBody.of(c.effective(r.at)) for c in r.expired],
            cluster=ClusterDriftBody(
                total=Amounts.of(r.cluster.total),
                claimed=Amounts.of(r.cluster.claimed),
                unclaimed_used=Amounts.of(r.cluster.unclaimed_used),
                drift={k: v.as_dict() for k, v in r.cluster.drift.items()},
                created=r.cluster.created,
            ),
        )
