"""The API's request and response bodies (pydantic), with the bounds that make bad input a 422.

Bounds are chosen so no accepted value can overflow a database column or the arithmetic of a
guard: sizes are strict non-negative integers (a JSON ``true`` or ``"4"`` is refused), counts of
threads fit a 32-bit column, memory and disk stay far below 64-bit sums over any fleet, and names
follow the ledger's own rules (so every backend stores the same names).
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema

from fleetgate.domain.capacity.claims import MAX_EXPIRES_IN_SECONDS, Claim, ClaimUpdate
from fleetgate.domain.capacity.denials import Denial, DimensionDetail
from fleetgate.domain.capacity.dimensions import Resources
from fleetgate.domain.capacity.model import NodeState, Placement
from fleetgate.domain.capacity.reconcile import PassReport

# --- bounds and names ---------------------------------------------------------------------------

#: Threads of one node, and a node's schedulable threads (a 32-bit column).
MAX_THREADS = 1 << 20
#: vCPUs of one placement or claim.
MAX_CPUS = 1 << 24
#: Memory (MB) or disk (GB) of one node, placement or claim: 2^40, about an exabyte of memory.
MAX_AMOUNT = 1 << 40
#: The largest 1-minute load average accepted.
MAX_LOAD = 1e9
#: How far ahead a claim may be dated (the domain's bound).
MAX_CLAIM_SECONDS = MAX_EXPIRES_IN_SECONDS
MAX_LABELS = 64
MAX_EVENTS = 1000

NamespaceName = Annotated[
    str, StringConstraints(min_length=1, max_length=63, pattern=r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
]
NodeName = Annotated[
    str,
    StringConstraints(
        min_length=1, max_length=253, pattern=r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$"
    ),
]
PoolName = Annotated[str, StringConstraints(max_length=253, pattern=r"^[A-Za-z0-9._/-]*$")]
LabelKey = Annotated[
    str, StringConstraints(min_length=1, max_length=253, pattern=r"^[A-Za-z0-9._/-]+$")
]
LabelValue = Annotated[str, StringConstraints(max_length=253, pattern=r"^[A-Za-z0-9._-]*$")]
RequestId = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"^[!-~]+$")]
#: Placement, claim and token ids are UUIDs; anything else cannot exist.
ObjectId = Annotated[str, StringConstraints(min_length=1, max_length=36, pattern=r"^[0-9a-f-]+$")]
EventKind = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"^[ -~]+$")]


def _whole_float_as_int(value: object) -> object:
    # JSON Schema's "integer" includes 4.0; a bool, a string or 4.5 is still refused (strict).
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


#: With ``Field(strict=True)``: a JSON integer, ``4`` or ``4.0``; never ``true``, ``"4"``, ``4.5``.
_WHOLE = BeforeValidator(_whole_float_as_int)
Cpus = Annotated[int, Field(strict=True, ge=0, le=MAX_CPUS), _WHOLE]
Amount = Annotated[int, Field(strict=True, ge=0, le=MAX_AMOUNT), _WHOLE]
Threads = Annotated[int, Field(strict=True, ge=0, le=MAX_THREADS), _WHOLE]


class _Request(BaseModel):
    """Request bodies refuse unknown fields: a misspelt field is a 422, not silently ignored."""

    model_config = ConfigDict(extra="forbid")


# --- errors and health --------------------------------------------------------------------------


class ErrorBody(BaseModel):
    """Every error: a stable code, a human message, and details that depend on the code."""

    model_config = ConfigDict(extra="allow")

    error: str
    message: str


class HealthBody(BaseModel):
    """A probe's answer."""

    status: Literal["ok", "ready"]


# --- amounts and denials --------------------------------------------------------------------------


class Amounts(BaseModel):
    """An amount in each allocation dimension."""

    cpus: int
    memory_mb: int
    disk_gb: int

    @classmethod
    def of(cls, res: Resources) -> Amounts:
        """From the domain value."""
        return cls(cpus=res.cpus, memory_mb=res.memory_mb, disk_gb=res.disk_gb)


class DimensionBody(BaseModel):
    """One dimension of a refusal. The demand dimension also splits ``used`` into its parts."""

    model_config = ConfigDict(extra="allow")

    dimension: str
    limit: float
    used: float
    requested: float
    exceeded: bool

    @classmethod
    def of(cls, d: DimensionDetail) -> DimensionBody:
        """From the domain value."""
        return cls.model_validate(d.as_dict())


class CandidateBody(BaseModel):
    """Why one candidate node refused a placement."""

    node: str
    stage: str
    demand_only: bool
    cordoned: bool
    dimensions: list[DimensionBody]

    @classmethod
    def of(cls, node: str, denial: Denial) -> CandidateBody:
        """From a node's denial."""
        return cls(
            node=node,
            stage=denial.stage.value,
            demand_only=denial.demand_only,
            cordoned=denial.cordoned,
            dimensions=[DimensionBody.of(d) for d in denial.dimensions],
        )


class CapacityRefusal(ErrorBody):
    """507: no candidate admitted the placement; each candidate's refusal, per dimension."""

    candidates: list[CandidateBody]


class DimensionsRefusal(ErrorBody):
    """507 or 403 (or 409 ``below_usage``) for a claim: the dimensions that refused."""

    dimensions: list[DimensionBody]


# --- nodes ----------------------------------------------------------------------------------------


class NodePut(_Request):
    """A node's declared capacity, pool and labels."""

    threads: Threads
    memory_mb: Amount
    disk_gb: Amount
    pool: PoolName = ""
    labels: dict[LabelKey, LabelValue] = Field(
        default_factory=dict,
        max_length=MAX_LABELS,
        # pydantic states the key pattern as patternProperties; without this a key that does not
        # match would be unconstrained in the schema while the API refuses it.
        json_schema_extra={"additionalProperties": False},
    )


class MetricsPut(_Request):
    """A node's published metrics; ``null`` means unknown."""

    cpu_load_1: Annotated[float, Field(ge=0, le=MAX_LOAD, allow_inf_nan=False)] | None
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


# --- placements -----------------------------------------------------------------------------------


class PlacementCreate(_Request):
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


# --- claims ---------------------------------------------------------------------------------------

ClaimSeconds = Annotated[int, Field(strict=True, ge=1, le=MAX_CLAIM_SECONDS), _WHOLE]
_EXPIRY_FORMS = ("expires_in_seconds", "expires_at")


def _no_default_in_schema(schema: dict[str, Any]) -> None:
    # An optional field that may not be null: absent means "not given", so no null default shown.
    schema.pop("default", None)


def _optional() -> Any:
    return Field(None, json_schema_extra=_no_default_in_schema)


def seconds_until(at: datetime, now: datetime) -> int:
    """Whole seconds from ``now`` to ``at``, rounded up; ``expires_at`` must lie ahead."""
    seconds = math.ceil((at - now).total_seconds())
    if seconds < 1:
        raise ValueError("expires_at: must be in the future")
    if seconds > MAX_CLAIM_SECONDS:
        raise ValueError(f"expires_at: must be at most {MAX_CLAIM_SECONDS} seconds ahead")
    return seconds


class ClaimCreate(_Request):
    """A new claim: its limits and when it ends, as exactly one of the two expiry forms."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"oneOf": [{"required": [name]} for name in _EXPIRY_FORMS]},
    )

    cpus: Cpus
    memory_mb: Amount
    disk_gb: Amount
    expires_in_seconds: ClaimSeconds | SkipJsonSchema[None] = _optional()
    expires_at: AwareDatetime | SkipJsonSchema[None] = _optional()

    @field_validator(*_EXPIRY_FORMS, mode="before")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        return _refuse_null(value)

    @model_validator(mode="after")
    def _one_expiry(self) -> ClaimCreate:
        if (self.expires_in_seconds is None) == (self.expires_at is None):
            raise ValueError("give exactly one of expires_in_seconds and expires_at")
        return self

    def expires_in(self, now: datetime) -> int:
        """The expiry as seconds from ``now``."""
        if self.expires_at is not None:
            return seconds_until(self.expires_at, now)
        assert self.expires_in_seconds is not None
        return self.expires_in_seconds


class ClaimPatch(_Request):
    """A claim update: only the fields present change (at most one expiry form)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"minProperties": 1, "not": {"required": list(_EXPIRY_FORMS)}},
    )

    cpus: Cpus | SkipJsonSchema[None] = _optional()
    memory_mb: Amount | SkipJsonSchema[None] = _optional()
    disk_gb: Amount | SkipJsonSchema[None] = _optional()
    expires_in_seconds: ClaimSeconds | SkipJsonSchema[None] = _optional()
    expires_at: AwareDatetime | SkipJsonSchema[None] = _optional()

    @field_validator("cpus", "memory_mb", "disk_gb", *_EXPIRY_FORMS, mode="before")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        return _refuse_null(value)

    @model_validator(mode="after")
    def _something_and_one_expiry(self) -> ClaimPatch:
        if not self.model_fields_set:
            raise ValueError("give at least one field to change")
        if self.expires_in_seconds is not None and self.expires_at is not None:
            raise ValueError("give at most one of expires_in_seconds and expires_at")
        return self

    def update(self, now: datetime) -> ClaimUpdate:
        """The field-masked domain update."""
        expires_in = self.expires_in_seconds
        if self.expires_at is not None:
            expires_in = seconds_until(self.expires_at, now)
        return ClaimUpdate(
            limit_cpus=self.cpus,
            limit_memory_mb=self.memory_mb,
            limit_disk_gb=self.disk_gb,
            expires_in_seconds=expires_in,
        )


def _refuse_null(value: Any) -> Any:
    # Runs only for a field present in the body: absent means "not given", so an explicit null
    # would be ambiguous and is refused.
    if value is None:
        raise ValueError("must not be null (leave the field out instead)")
    return value


class ClaimBody(BaseModel):
    """A claim: its limits, what its namespace uses, and its effective state."""

    id: str
    namespace: str
    cpus: int
    memory_mb: int
    disk_gb: int
    used: Amounts
    overage: Amounts
    state: Literal["active", "expired"]
    expires_at: datetime
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, claim: Claim) -> ClaimBody:
        """From the domain value (its state already the effective coverage)."""
        return cls(
            id=claim.id,
            namespace=claim.namespace,
            cpus=claim.limit.cpus,
            memory_mb=claim.limit.memory_mb,
            disk_gb=claim.limit.disk_gb,
            used=Amounts.of(claim.used),
            overage=Amounts.of(claim.overage),
            state=claim.state.value,
            expires_at=claim.expires_at,
            created_at=claim.created_at,
            updated_at=claim.updated_at,
        )


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


# --- rotation -------------------------------------------------------------------------------------

#: The largest YAML policy text accepted (a policy is a few hundred bytes).
MAX_POLICY_TEXT = 64 * 1024
Duration = Annotated[str, StringConstraints(min_length=1, max_length=64)]


class RotationCheckRequest(_Request):
    """``fleetgate check`` over HTTP: a RotationPolicy and the NodePool facts it is checked with.

    ``policy`` is the manifest as a JSON object, or its YAML text (one document).
    """

    policy: dict[str, Any] | Annotated[str, StringConstraints(max_length=MAX_POLICY_TEXT)]
    expire_after: Duration = Field(description='NodePool expireAfter, e.g. "14d", or "Never".')
    termination_grace_period: Duration | None = Field(
        None, description="NodePool terminationGracePeriod; unset uses the drain fallback."
    )
    nodes: Annotated[int, Field(strict=True, ge=0, le=1_000_000), _WHOLE] = Field(
        0, description="NodeClaims in the pool (N)."
    )


class FindingBody(BaseModel):
    """One finding of the derivation."""

    severity: str
    code: str
    side: str
    message: str


class RotationCheckBody(BaseModel):
    """The JSON of ``fleetgate check --format json``: inputs, derived quantities, findings."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    inputs: dict[str, Any]
    t_rot: float | None = Field(alias="tRot")
    t_rot_est: float | None = Field(alias="tRotEst")
    drain_estimate: float | None = Field(alias="drainEstimate")
    provisioning_estimate: float | None = Field(alias="provisioningEstimate")
    lead_time: float | None = Field(alias="leadTime")
    age_threshold: float | None = Field(alias="A")
    guaranteed_chances: int | None = Field(alias="G")
    capacity: int | None = Field(alias="C")
    findings: list[FindingBody]


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
