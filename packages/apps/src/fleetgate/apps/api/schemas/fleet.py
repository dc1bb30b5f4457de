"""The simulator's fleet file as the API reads it: the schema published for ``fleet``.

The fields are those :func:`fleetgate.apps.simulate.fleet.load_fleet` reads (the format is in
docs/rotation-simulator.md), narrowed so that every fleet the schema admits is one the simulator
takes and can run without leaving the calendar:

- an unknown field is refused, booleans are refused where a number is expected, and a node count
  is at most :data:`MAX_SIMULATE_NODES` (``generate.count``, or the length of ``nodes``);
- durations are the policy's syntax with at most four digits a component
  (:data:`~fleetgate.apps.api.schemas.durations.SIMULATION_DURATION`), and instants are RFC3339
  in the years 2000 to 2999, so no instant a run computes from them overflows;
- ``fleet`` lists ``nodes`` or ``generates`` them, exactly one of the two.

Rules that relate a field to another one (or to the request's ``start``) are stated in the
descriptions, as JSON Schema cannot say them, and judged by the loader, which names the field:
node names are unique, a node's ``createdAt`` is not after the start, its ``disruptedAt`` not
before it. The YAML text form is validated by the same model once parsed
(:func:`fleet_document`), so both forms obey the same rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    StringConstraints,
    Tag,
)
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from fleetgate.apps.api.schemas.common import MAX_LABELS, WHOLE_NUMBER
from fleetgate.apps.api.schemas.durations import (
    POSITIVE_SIMULATION_DURATION,
    SIMULATION_DURATION,
)
from fleetgate.domain.rotation.constants import FIRST_YEAR, LAST_YEAR

__all__ = [
    "FIRST_YEAR",
    "INSTANT",
    "LAST_YEAR",
    "MAX_SIMULATE_NODES",
    "FleetFile",
    "PositiveSimulationDuration",
    "SimulationDuration",
    "SimulationInstant",
    "fleet_document",
]

#: The largest fleet a request may simulate.
MAX_SIMULATE_NODES = 2_000
#: The loader's own bound on ``replicas`` and ``limits.nodes``.
MAX_COUNT = 10_000
_MAX_TEXT = 253

# An RFC3339 instant as the loader reads it (``parse_timestamp``), in the years 2000 to 2999, and
# only real dates: each month's days, 29 February in leap years only (2000, 2400 and 2800 are the
# century leap years of the range), no leap second (Python's datetime has none).
_LEAP_YEAR = "2(?:[0-9](?:0[48]|[2468][048]|[13579][26])|[048]00)"
_MONTH_DAY = (
    "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    "|02-(?:0[1-9]|1[0-9]|2[0-8]))"
)
_DATE = f"(?:2[0-9]{{3}}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)"
_TIME = "[Tt](?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,9})?"
_OFFSET = "(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
#: The pattern of a simulation's instants.
INSTANT = f"^{_DATE}{_TIME}{_OFFSET}$"


@dataclass(frozen=True)
class Matching:
    """``Annotated[str, Matching(pattern, reason)]``: a string the published ``pattern`` admits,
    else refused with ``reason`` (pydantic's own message would quote the whole, long pattern)."""

    pattern: str
    reason: str

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        """The string's schema, then the pattern check."""
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """The string's JSON Schema with the pattern."""
        return {**handler(schema), "pattern": self.pattern}

    def _check(self, value: str) -> str:
        if re.fullmatch(self.pattern, value) is None:
            raise ValueError(self.reason)
        return value


def _instant_text(value: Any) -> Any:
    # YAML reads an unquoted timestamp as a datetime; the loader takes it as the instant it is.
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("must carry a timezone (e.g. a trailing Z)")
        return value.isoformat()
    return value


_PERCENT = "^(100|[1-9]?[0-9])%$"
_PERCENT_REASON = 'must be a count or a percentage from "0%" to "100%"'
_INSTANT_REASON = (
    "must be an RFC3339 instant such as 2024-01-01T00:00:00Z, in the years "
    f"{FIRST_YEAR} to {LAST_YEAR}"
)
_DURATION_REASON = 'must be a duration such as "14d" or "1h30m" (at most four digits a component)'
SimulationInstant = Annotated[
    str, Matching(INSTANT, _INSTANT_REASON), BeforeValidator(_instant_text)
]
SimulationDuration = Annotated[str, Matching(SIMULATION_DURATION, _DURATION_REASON)]
PositiveSimulationDuration = Annotated[
    str,
    Matching(POSITIVE_SIMULATION_DURATION, _DURATION_REASON.replace("duration", "duration > 0", 1)),
]
Text = Annotated[str, StringConstraints(min_length=1, max_length=_MAX_TEXT)]
LabelText = Annotated[str, StringConstraints(max_length=_MAX_TEXT)]
Count = Annotated[int, Field(strict=True, ge=0, le=MAX_COUNT), WHOLE_NUMBER]
Labels = Annotated[dict[LabelText, LabelText], Field(max_length=MAX_LABELS)]


class _Part(BaseModel):
    """camelCase on the wire, as in the fleet file; unknown fields refused; no coercion."""

    model_config = ConfigDict(
        extra="forbid", strict=True, alias_generator=to_camel, populate_by_name=True
    )


class FleetNodeSpec(_Part):
    """One listed node (NodeClaim) of the pool."""

    name: Text = Field(description="Unique among the fleet's nodes.")
    created_at: SimulationInstant = Field(description="Not after the simulation's start.")
    expire_after: PositiveSimulationDuration | None = Field(
        None, description="This node's own expireAfter (default: the template's)."
    )
    termination_grace_period: PositiveSimulationDuration | None = Field(
        None, description="This node's own terminationGracePeriod (default: the template's)."
    )
    drifted: bool = Field(False, description="Karpenter reports the node Drifted.")
    disrupted_at: SimulationInstant | None = Field(
        None,
        description="When Karpenter starts replacing the node itself; not before the "
        "simulation's start.",
    )
    do_not_disrupt: Literal[True, "true"] | PositiveSimulationDuration | None = Field(
        None,
        description='A Pod on the node carries karpenter.sh/do-not-disrupt: "true", or a '
        "duration counted from the simulation's start.",
    )


class FleetLimits(_Part):
    """The NodePool's ``spec.limits``."""

    nodes: Count | None = None


_Bound = (
    Annotated[int, Field(strict=True, ge=0, le=MAX_COUNT), WHOLE_NUMBER]
    | Annotated[str, Matching(_PERCENT, _PERCENT_REASON)]
)
_UnhealthyPolicy = Literal["IfHealthyBudget", "AlwaysAllow"]


class MinAvailableBudget(_Part):
    """A PodDisruptionBudget over the workload (one Pod a node) by ``minAvailable``."""

    min_available: _Bound = Field(description="Healthy Pods that must remain: a count or N%.")
    unhealthy_pod_eviction_policy: _UnhealthyPolicy = "IfHealthyBudget"


class MaxUnavailableBudget(_Part):
    """A PodDisruptionBudget over the workload (one Pod a node) by ``maxUnavailable``."""

    max_unavailable: _Bound = Field(description="Pods that may be unavailable: a count or N%.")
    unhealthy_pod_eviction_policy: _UnhealthyPolicy = "IfHealthyBudget"


class FleetGenerate(_Part):
    """Nodes generated with ages spread evenly over ``spread`` (the first is the oldest)."""

    count: Annotated[int, Field(strict=True, ge=1, le=MAX_SIMULATE_NODES), WHOLE_NUMBER]
    spread: SimulationDuration = "0s"
    prefix: Text = Field(
        "node", description="Names are the prefix, a dash and the number (zero-padded)."
    )


class FleetBudget(_Part):
    """One NodePool disruption budget (``spec.disruption.budgets[]``), as Karpenter's CRD has it."""

    nodes: Annotated[str, StringConstraints(pattern=r"^((100|[0-9]{1,2})%|[0-9]{1,5})$")] = Field(
        "10%", description="A count of nodes or a percentage of the pool's (rounded up)."
    )
    schedule: Annotated[str, StringConstraints(max_length=_MAX_TEXT)] | None = Field(
        None,
        description="Cron, UTC: five fields or @yearly/@annually/@monthly/@weekly/@daily/"
        "@midnight/@hourly; set exactly when duration is. The loader names what it cannot read.",
    )
    duration: (
        Annotated[
            str, StringConstraints(pattern=r"^(([0-9]{1,4}(h|m))|([0-9]{1,4}h[0-9]{1,4}m))(0s)?$")
        ]
        | None
    ) = Field(None, description="Hours and/or minutes the budget is active after each hit.")
    reasons: list[Literal["Underutilized", "Empty", "Drifted"]] | None = Field(
        None, description="The reasons it limits (absent: every reason)."
    )


class _FleetTemplate(_Part):
    """The NodePool and its template; the nodes come from the subclass."""

    pool: Text = "default"
    labels: Labels | None = Field(
        None, description="The NodePool's labels: the policy's nodePoolSelector must select them."
    )
    expire_after: PositiveSimulationDuration = Field(description="The template's expireAfter.")
    termination_grace_period: PositiveSimulationDuration | None = None
    replicas: Count | None = Field(None, description="spec.replicas: set, the pool is static.")
    ready: bool = Field(True, description="The NodePool's Ready condition.")
    limits: FleetLimits | None = None
    pod_disruption_budget: MinAvailableBudget | MaxUnavailableBudget | None = Field(
        None, description="A PodDisruptionBudget over the workload Pods (one on each node)."
    )
    budgets: Annotated[list[FleetBudget], Field(max_length=50)] | None = Field(
        None, description="spec.disruption.budgets (absent: the CRD's default, 10%)."
    )


class ListedFleetSpec(_FleetTemplate):
    """A pool whose nodes are listed one by one."""

    nodes: Annotated[list[FleetNodeSpec], Field(min_length=1, max_length=MAX_SIMULATE_NODES)] = (
        Field(description="Each name appears once.")
    )


class GeneratedFleetSpec(_FleetTemplate):
    """A pool whose nodes are generated."""

    generate: FleetGenerate


def _listed_or_generated(value: Any) -> str | None:
    # Which of the two forms a fleet is: the one whose key it has (nodes wins, so a fleet with
    # both is refused for the extra ``generate``, and one with neither by the discriminator).
    # The tags are not keys of the file, so an error's location names only the file's own keys.
    if isinstance(value, dict):
        return "listed" if "nodes" in value else "generated" if "generate" in value else None
    return "listed" if isinstance(value, ListedFleetSpec) else "generated"


FleetSpec = Annotated[
    Annotated[ListedFleetSpec, Tag("listed")] | Annotated[GeneratedFleetSpec, Tag("generated")],
    Discriminator(
        _listed_or_generated,
        custom_error_type="fleet_nodes",
        custom_error_message="give exactly one of nodes (a list) or generate (count, spread)",
    ),
]


class FleetEnv(_Part):
    """How long things really take (default: the policy's estimates)."""

    provisioning: SimulationDuration | None = None
    drain: SimulationDuration | None = None


class FleetFile(_Part):
    """A fleet file: the pool, its nodes, and the environment (docs/rotation-simulator.md)."""

    fleet: FleetSpec
    env: FleetEnv | None = None

    def document(self) -> dict[str, Any]:
        """The file as plain data, only the fields given, for the simulator's loader."""
        data: dict[str, Any] = self.model_dump(by_alias=True, exclude_unset=True)
        return data


def fleet_document(value: FleetFile | Any) -> dict[str, Any]:
    """The loader's input from a validated fleet, or from parsed YAML (validated here first).

    Raises pydantic's ``ValidationError`` for YAML content the schema refuses.
    """
    model = value if isinstance(value, FleetFile) else FleetFile.model_validate(value)
    return model.document()
