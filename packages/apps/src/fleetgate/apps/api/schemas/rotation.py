"""The rotation check's and simulation's requests, and the check's report."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from fleetgate.apps.api.schemas.common import WHOLE_NUMBER, RequestBody
from fleetgate.apps.api.schemas.durations import DURATION, POSITIVE_DURATION
from fleetgate.apps.api.schemas.fleet import (
    FIRST_YEAR,
    LAST_YEAR,
    FleetFile,
    Matching,
    PositiveSimulationDuration,
    SimulationDuration,
    SimulationInstant,
)
from fleetgate.apps.api.schemas.policy import RotationPolicyManifest
from fleetgate.apps.services.check import parse_expire_after, parse_grace_period

#: The largest YAML policy text accepted (a policy is a few hundred bytes).
MAX_POLICY_TEXT = 64 * 1024
PolicyText = Annotated[
    str,
    StringConstraints(max_length=MAX_POLICY_TEXT),
    Field(
        description="The same manifest as YAML text (one document).",
        json_schema_extra={"contentMediaType": "application/yaml"},
    ),
]
#: The policy: a RotationPolicy manifest as an object (its schema is the CRD's), or its YAML.
Policy = RotationPolicyManifest | PolicyText


@dataclass(frozen=True)
class ParsedDuration(Matching):
    """A duration the published pattern admits; any other text is refused with the reason
    ``fleetgate check`` gives the same text (its parser's), so both entry points answer alike
    and no answer quotes the pattern."""

    parse: Callable[[str], object] = parse_expire_after

    def _check(self, value: str) -> str:
        if re.fullmatch(self.pattern, value) is None:
            try:
                self.parse(value)
            except ValueError as exc:
                raise ValueError(str(exc)) from None
            raise ValueError(self.reason)  # it parses, but past the bounds the API publishes
        return value


ExpireAfter = Annotated[
    str,
    StringConstraints(max_length=64),
    ParsedDuration(
        f"^Never$|{POSITIVE_DURATION}",
        'must be "Never" or a duration such as "14d" or "1h30m" (at most six digits a number)',
        parse_expire_after,
    ),
]
GracePeriod = Annotated[
    str,
    StringConstraints(max_length=64),
    ParsedDuration(
        DURATION,
        'must be a duration such as "1h" or "30m" (at most six digits a number)',
        parse_grace_period,
    ),
]


class RotationCheckRequest(RequestBody):
    """``fleetgate check`` over HTTP: a RotationPolicy and the NodePool facts it is checked with.

    ``policy`` is the manifest as a JSON object, or its YAML text (one document).
    """

    policy: Policy
    expire_after: ExpireAfter = Field(description='NodePool expireAfter, e.g. "14d", or "Never".')
    termination_grace_period: GracePeriod | None = Field(
        None, description="NodePool terminationGracePeriod; unset uses the drain fallback."
    )
    nodes: Annotated[int, Field(strict=True, ge=0, le=1_000_000), WHOLE_NUMBER] = Field(
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


#: The longest span a request may simulate (virtual time).
MAX_SIMULATE_DAYS = 120
#: The longest of a policy's durations a simulation takes: with the fleet's own bounds, no
#: instant a run computes from them leaves the calendar (a policy for ``check`` has no such bound).
MAX_SIMULATE_POLICY_DAYS = 36_500
#: Wall-clock seconds one simulation may take before it is stopped (the API stays responsive);
#: each app may set its own (``app.state.simulate_seconds``).
SIMULATE_SECONDS = 30.0
#: The largest YAML fleet text accepted (with the policy text, it fits the body limit even
#: when every character is sent as a \u escape).
MAX_FLEET_TEXT = 64 * 1024
FleetText = Annotated[
    str,
    StringConstraints(max_length=MAX_FLEET_TEXT),
    Field(
        description="The same fleet file as YAML text (read as the CLI reads --fleet, then held "
        "to the same schema).",
        json_schema_extra={"contentMediaType": "application/yaml"},
    ),
]


class RotationSimulateRequest(RequestBody):
    """``fleetgate simulate`` over HTTP: a RotationPolicy, a fleet, and the span to simulate.

    ``policy`` is the manifest as a JSON object or its YAML text; ``fleet`` is a fleet file
    (``{"fleet": {...}, "env": {...}}``, see docs/rotation-simulator.md) as an object or YAML.
    """

    policy: Policy = Field(
        description="The RotationPolicy. For a simulation its nodePoolSelector must select "
        "fleet.fleet.labels, and each of its durations (ageThreshold, surge.readyTimeout, "
        "cooldownAfter, failurePause, retryBackoff, drainEstimate, provisioningEstimate) is at "
        f"most {MAX_SIMULATE_POLICY_DAYS}d, and each exclusion's start and end lies in the "
        f"years {FIRST_YEAR} to {LAST_YEAR} (UTC)."
    )
    fleet: FleetFile | FleetText = Field(
        description="The fleet file; its labels must be selected by the policy's "
        "nodePoolSelector, its nodes' createdAt must not be after start and their disruptedAt "
        "not before it."
    )
    start: SimulationInstant = Field(
        "2024-01-01T00:00:00Z",
        description=f"Where virtual time starts (RFC3339, in the years {FIRST_YEAR} to "
        f"{LAST_YEAR}).",
    )
    span: PositiveSimulationDuration = Field(
        "30d", description=f"How long to simulate: more than 0, at most {MAX_SIMULATE_DAYS}d."
    )
    env_provisioning: SimulationDuration | None = Field(
        None,
        description="How long a surge node really takes (default: the fleet's env, else "
        "the policy's estimate).",
    )
    env_drain: SimulationDuration | None = Field(
        None,
        description="How long a drain really takes (default: the fleet's env, else the "
        "policy's estimate).",
    )
