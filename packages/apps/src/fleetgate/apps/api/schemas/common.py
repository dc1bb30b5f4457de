"""Bounds, names and the bodies every resource shares: errors, amounts, refusal details.

Bounds are chosen so no accepted value can overflow a database column or the arithmetic of a
guard: sizes are strict non-negative integers (a JSON ``true`` or ``"4"`` is refused), counts of
threads fit a 32-bit column, memory and disk stay far below 64-bit sums over any fleet, and names
follow the ledger's own rules (so every backend stores the same names).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints

from fleetgate.domain.capacity.claims import MAX_EXPIRES_IN_SECONDS
from fleetgate.domain.capacity.denials import Denial, DimensionDetail
from fleetgate.domain.capacity.dimensions import MAX_AMOUNT, MAX_CPUS, MAX_THREADS, Resources

# --- bounds and names ---------------------------------------------------------------------------

# MAX_THREADS, MAX_CPUS and MAX_AMOUNT are the domain's (every entry point's) bounds.
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
WHOLE_NUMBER = BeforeValidator(_whole_float_as_int)
Cpus = Annotated[int, Field(strict=True, ge=0, le=MAX_CPUS), WHOLE_NUMBER]
Amount = Annotated[int, Field(strict=True, ge=0, le=MAX_AMOUNT), WHOLE_NUMBER]
Threads = Annotated[int, Field(strict=True, ge=0, le=MAX_THREADS), WHOLE_NUMBER]
#: A node's hardware threads and memory: a node without any admits nothing, so 0 is a mistake.
NodeThreads = Annotated[int, Field(strict=True, ge=1, le=MAX_THREADS), WHOLE_NUMBER]
NodeMemory = Annotated[int, Field(strict=True, ge=1, le=MAX_AMOUNT), WHOLE_NUMBER]


class RequestBody(BaseModel):
    """Request bodies refuse unknown fields: a misspelt field is a 422, not silently ignored."""

    model_config = ConfigDict(extra="forbid")


# --- errors and health --------------------------------------------------------------------------


class ErrorBody(BaseModel):
    """Every error: a stable code, a human message, and details that depend on the code."""

    model_config = ConfigDict(extra="allow")

    error: str
    message: str


#: What a route that reads a JSON body answers to a body sent as another type (errors.py's
#: ``unsupported_media_type``); spread into each such route's ``responses``.
UNSUPPORTED_MEDIA_TYPE: dict[int | str, dict[str, Any]] = {
    415: {"model": ErrorBody, "description": "The body was not sent as application/json."}
}


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

    @staticmethod
    def wire(d: DimensionDetail) -> dict[str, Any]:
        """``of(d).model_dump()``, built directly: a 507 carries one per dimension of every
        candidate, and validating each into a model only to dump it again cost more than the
        rest of the answer (a test holds the two equal)."""
        return {
            "dimension": d.dimension,
            "limit": float(d.limit),
            "used": float(d.used),
            "requested": float(d.requested),
            "exceeded": bool(d.exceeded),
            **d.parts,
        }


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

    @staticmethod
    def wire(node: str, denial: Denial) -> dict[str, Any]:
        """``of(node, denial).model_dump()``, built directly (see ``DimensionBody.wire``)."""
        return {
            "node": node,
            "stage": denial.stage.value,
            "demand_only": denial.demand_only,
            "cordoned": denial.cordoned,
            "dimensions": [DimensionBody.wire(d) for d in denial.dimensions],
        }


class CapacityRefusal(ErrorBody):
    """507: no candidate admitted the placement; each candidate's refusal, per dimension."""

    candidates: list[CandidateBody]


class DimensionsRefusal(ErrorBody):
    """507 or 403 (or 409 ``below_usage``) for a claim: the dimensions that refused."""

    dimensions: list[DimensionBody]
