"""Claim bodies: create (one of two expiry forms), the field-masked update, a claim."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

from fleetgate.apps.api.schemas.common import (
    MAX_CLAIM_SECONDS,
    WHOLE_NUMBER,
    Amount,
    Amounts,
    Cpus,
    RequestBody,
)
from fleetgate.domain.capacity.claims import Claim, ClaimUpdate

ClaimSeconds = Annotated[int, Field(strict=True, ge=1, le=MAX_CLAIM_SECONDS), WHOLE_NUMBER]
_EXPIRY_FORMS = ("expires_in_seconds", "expires_at")


def _no_default_in_schema(schema: dict[str, Any]) -> None:
    # An optional field that may not be null: absent means "not given", so no null default shown.
    schema.pop("default", None)


def _optional(description: str | None = None) -> Any:
    return Field(None, description=description, json_schema_extra=_no_default_in_schema)


# JSON Schema cannot say "after now", so the rule is stated here and enforced by the server. A
# past instant is refused rather than taken as "already expired": a claim that reserves nothing
# from the moment it is written is a mistake (a wrong zone, a skewed clock), and the other form,
# expires_in_seconds, already starts at 1.
_EXPIRES_AT = (
    "When the claim ends: an RFC3339 instant with a UTC offset, at least 1 s and at most "
    f"{MAX_CLAIM_SECONDS} s after the server's clock; an earlier or later one is a 422 naming "
    "expires_at."
)


def seconds_until(at: datetime, now: datetime) -> int:
    """Whole seconds from ``now`` to ``at``, rounded up; ``expires_at`` must lie ahead."""
    seconds = math.ceil((at - now).total_seconds())
    if seconds < 1:
        raise ValueError("expires_at: must be in the future")
    if seconds > MAX_CLAIM_SECONDS:
        raise ValueError(f"expires_at: must be at most {MAX_CLAIM_SECONDS} seconds ahead")
    return seconds


class ClaimCreate(RequestBody):
    """A new claim: its limits and when it ends, as exactly one of the two expiry forms."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"oneOf": [{"required": [name]} for name in _EXPIRY_FORMS]},
    )

    cpus: Cpus
    memory_mb: Amount
    disk_gb: Amount
    expires_in_seconds: ClaimSeconds | SkipJsonSchema[None] = _optional()
    expires_at: AwareDatetime | SkipJsonSchema[None] = _optional(_EXPIRES_AT)

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


class ClaimPatch(RequestBody):
    """A claim update: only the fields present change (at most one expiry form)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"minProperties": 1, "not": {"required": list(_EXPIRY_FORMS)}},
    )

    cpus: Cpus | SkipJsonSchema[None] = _optional()
    memory_mb: Amount | SkipJsonSchema[None] = _optional()
    disk_gb: Amount | SkipJsonSchema[None] = _optional()
    expires_in_seconds: ClaimSeconds | SkipJsonSchema[None] = _optional()
    expires_at: AwareDatetime | SkipJsonSchema[None] = _optional(_EXPIRES_AT)

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
