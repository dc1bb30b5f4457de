"""The RotationPolicy manifest as the API reads it: the schema published for ``policy``.

The fields, types, required fields, enums, bounds and patterns are the domain's one schema of a
policy (:mod:`fleetgate.domain.rotation.schema`, from which the chart's CRDs are generated;
tests/apps/api/schemas/test_policy.py holds the two together field by field). Defaults are not
restated: an absent field is left absent, and the domain's reader gives it the schema's default.
Where the API says more than the schema, it is because the server checks at once what the
controller would only report on its next pass, so a schema-valid manifest is one the server
takes:

- an unknown field is refused (Kubernetes would prune it; a typo must not become a default);
- (none for durations and numbers: their patterns and bounds are the domain's one definition,
  :mod:`fleetgate.domain.rotation.fields`, which the CRD also states);
- a window names a time zone the server knows, and each day once;
- ``In``/``NotIn`` need values and ``Exists``/``DoesNotExist`` take none;
- ``prePull.enabled`` can only be false (the CRD's CEL rule).

Two rules relate two fields and no JSON Schema keyword states them, so the descriptions do: a
window's ``end`` differs from its ``start``, and an exclusion's ``end`` is after its ``start``.
Validated here first, then read by the domain (:func:`policy_from_manifest`), which judges the
meaning and names the field of any problem.
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Literal
from zoneinfo import available_timezones

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    WithJsonSchema,
)
from pydantic.alias_generators import to_camel

from fleetgate.apps.api.schemas.fleet import Matching
from fleetgate.domain.rotation.fields import (
    AGE_THRESHOLD,
    MAX_ROTATION_CHANCES,
    MAX_UNAVAILABLE,
    MIN_ROTATION_CHANCES,
    NON_NEGATIVE_DURATION,
    POSITIVE_DURATION,
    duration_problem,
)
from fleetgate.domain.rotation.policy import API_VERSIONS, KIND
from fleetgate.domain.rotation.windows import DAY_NAMES, END_PATTERN, START_PATTERN, load_zone

__all__ = ["RotationPolicyManifest", "time_zones"]

_MAX_NAME = 253


@cache
def time_zones() -> tuple[str, ...]:
    """Every IANA zone name this server loads, sorted: what a window's ``timezone`` may be."""
    return tuple(sorted(name for name in available_timezones() if load_zone(name) is not None))


def _known_zone(name: str) -> str:
    if name not in time_zones():
        raise ValueError(f"unknown time zone {name!r} (an IANA name such as Europe/Berlin)")
    return name


class DurationMatching(Matching):
    """A duration the field's pattern admits, else refused with the domain's own reason."""

    def _check(self, value: str) -> str:
        problem = duration_problem(value, self.pattern)
        if problem is not None:
            raise ValueError(problem)
        return value


PositiveDuration = Annotated[str, DurationMatching(POSITIVE_DURATION, "")]
NonNegativeDuration = Annotated[str, DurationMatching(NON_NEGATIVE_DURATION, "")]
AgeThreshold = Annotated[str, DurationMatching(AGE_THRESHOLD, "")]
TimeZone = Annotated[
    str,
    AfterValidator(_known_zone),
    WithJsonSchema({"type": "string", "enum": list(time_zones())}),
]
Day = Literal[DAY_NAMES]  # type: ignore[valid-type]
LabelText = Annotated[str, StringConstraints(max_length=_MAX_NAME)]


def _whole(value: Any) -> Any:
    # JSON Schema's ``integer`` is any number with no fractional part, 3.0 included, and the
    # Kubernetes API server takes 3.0 for an integer field too; strict mode alone would not.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


#: Read an integer as JSON Schema and Kubernetes do (``3`` or ``3.0``; never ``true``).
WHOLE = BeforeValidator(_whole)


class _Manifest(BaseModel):
    """camelCase on the wire, as in every Kubernetes manifest; unknown fields refused."""

    model_config = ConfigDict(
        extra="forbid", strict=True, alias_generator=to_camel, populate_by_name=True
    )


class SetRequirement(_Manifest):
    """``key In/NotIn values``: at least one value."""

    key: Annotated[str, StringConstraints(min_length=1)]
    operator: Literal["In", "NotIn"]
    values: Annotated[list[str], Field(min_length=1)]


class ExistenceRequirement(_Manifest):
    """``key Exists/DoesNotExist``: no values."""

    key: Annotated[str, StringConstraints(min_length=1)]
    operator: Literal["Exists", "DoesNotExist"]
    values: Annotated[list[str], Field(max_length=0)] | None = None


class NodePoolSelector(_Manifest):
    """A label selector over NodePool labels; ``{}`` selects every NodePool."""

    match_labels: dict[str, str] | None = None
    match_expressions: (
        list[Annotated[SetRequirement | ExistenceRequirement, Field(discriminator="operator")]]
        | None
    ) = None


class MaintenanceWindowSpec(_Manifest):
    """One window: local ``start``-``end`` on ``days`` in ``timezone`` (end <= start wraps)."""

    timezone: TimeZone
    days: Annotated[list[Day], Field(min_length=1, json_schema_extra={"uniqueItems": True})]
    start: Annotated[str, StringConstraints(pattern=START_PATTERN)]
    end: Annotated[str, StringConstraints(pattern=END_PATTERN)] = Field(
        description="Must differ from start (00:00-24:00 is a whole day)."
    )


def _text(value: Any) -> Any:
    # Lax datetimes would also take a number as Unix time; the schema says an RFC3339 string.
    if not isinstance(value, str):
        raise ValueError("must be an RFC3339 instant such as 2024-12-24T00:00:00Z")
    return value


#: An RFC3339 instant with an offset, given as text (read laxly: JSON has no datetime type).
Instant = Annotated[AwareDatetime, Field(strict=False), BeforeValidator(_text)]


class ExclusionSpec(_Manifest):
    """A range of instants in which nothing starts."""

    start: Instant
    end: Instant = Field(description="Must be after start.")


class Toggle(_Manifest):
    """``{enabled: bool}``."""

    enabled: bool | None = None


class Reserved(_Manifest):
    """``{enabled: false}``: reserved, must stay disabled."""

    enabled: Literal[False] | None = None


class MatchNodeRequirementsSpec(_Manifest):
    """Node label keys the surge node must or should share with the one it replaces."""

    required: list[str] | None = None
    preferred: list[str] | None = None


class SurgeSpec(_Manifest):
    """How one make-before-break rotation runs."""

    max_unavailable: Annotated[int, Field(ge=MAX_UNAVAILABLE, le=MAX_UNAVAILABLE), WHOLE] | None = (
        None
    )
    ready_timeout: PositiveDuration | None = None
    cooldown_after: NonNegativeDuration | None = None
    failure_pause: PositiveDuration | None = None
    retry_backoff: PositiveDuration | None = None
    drain_estimate: PositiveDuration | None = None
    provisioning_estimate: PositiveDuration | None = None
    match_node_requirements: MatchNodeRequirementsSpec | None = None
    forceful_fallback: Toggle | None = None


class RotationPolicySpec(_Manifest):
    """Which NodePools rotate, in which windows, and how."""

    node_pool_selector: NodePoolSelector
    age_threshold: AgeThreshold | None = None
    min_rotation_chances: (
        Annotated[int, Field(ge=MIN_ROTATION_CHANCES, le=MAX_ROTATION_CHANCES), WHOLE] | None
    ) = None
    maintenance_windows: Annotated[list[MaintenanceWindowSpec], Field(min_length=1)]
    exclusions: list[ExclusionSpec] | None = None
    surge: SurgeSpec | None = None
    pre_pull: Reserved | None = None
    rotate_drifted: Toggle | None = None
    ignore_disruption_budgets: Toggle | None = None


class ObjectMetadata(_Manifest):
    """The usual Kubernetes object metadata; only ``name`` is kept."""

    name: Annotated[str, StringConstraints(max_length=_MAX_NAME)] | None = None
    generate_name: Any = None
    namespace: Any = None
    labels: Any = None
    annotations: Any = None
    uid: Any = None
    resource_version: Any = None
    generation: Any = None
    creation_timestamp: Any = None
    deletion_timestamp: Any = None
    deletion_grace_period_seconds: Any = None
    finalizers: Any = None
    owner_references: Any = None
    managed_fields: Any = None
    self_link: Any = None


class RotationPolicyManifest(_Manifest):
    """A RotationPolicy manifest (``fleetgate.io/v1alpha1``, or the reference's API group)."""

    api_version: Literal[API_VERSIONS]  # type: ignore[valid-type]
    kind: Literal[KIND]  # type: ignore[valid-type]
    metadata: ObjectMetadata | None = None
    spec: RotationPolicySpec
    status: Any = Field(None, description="Observational; ignored.")

    def document(self) -> dict[str, Any]:
        """The manifest as plain data, only the fields given, for the domain's reader."""
        data: dict[str, Any] = self.model_dump(by_alias=True, exclude_unset=True)
        return data
