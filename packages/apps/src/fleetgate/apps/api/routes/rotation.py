"""``POST /v1/rotation/check`` and ``/simulate``: ``fleetgate check`` and ``fleetgate simulate``
over HTTP, for any token."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import yaml
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from fleetgate.apps.api.auth import GuardedRoute, access, bearer_scheme
from fleetgate.apps.api.deps import container_of
from fleetgate.apps.api.errors import ApiError, validation_error
from fleetgate.apps.api.schemas import (
    UNSUPPORTED_MEDIA_TYPE,
    ErrorBody,
    RotationCheckBody,
    RotationCheckRequest,
    RotationSimulateRequest,
)
from fleetgate.apps.api.schemas.fleet import FIRST_YEAR, LAST_YEAR, FleetFile, fleet_document
from fleetgate.apps.api.schemas.policy import RotationPolicyManifest
from fleetgate.apps.api.schemas.rotation import (
    MAX_SIMULATE_DAYS,
    MAX_SIMULATE_POLICY_DAYS,
    SIMULATE_SECONDS,
)
from fleetgate.apps.policyfile import PolicyFileError, policies_from_text
from fleetgate.apps.services.bounded import RanTooLong
from fleetgate.apps.services.check import (
    CheckInputs,
    check,
    parse_expire_after,
    parse_grace_period,
)
from fleetgate.apps.services.simulation import (
    PoolNotSelected,
    SimulationError,
    SimulationInputs,
)
from fleetgate.apps.simulate.fleet import FleetError, load_fleet, parse_instant
from fleetgate.apps.yamlfile import describe_yaml_error
from fleetgate.domain.durations import DurationError, parse_duration
from fleetgate.domain.rotation.manifest import policy_from_manifest
from fleetgate.domain.rotation.policy import PolicyError, RotationPolicy

router = APIRouter(
    prefix="/v1/rotation",
    tags=["rotation"],
    route_class=GuardedRoute,
    dependencies=[Depends(bearer_scheme)],
    responses={
        401: {"model": ErrorBody, "description": "No or bad token."},
        422: {"model": ErrorBody, "description": "Invalid policy or duration; names the field."},
    },
)


def _invalid(field: str, problems: list[str] | tuple[str, ...]) -> ApiError:
    """422 listing each problem; a ``path: reason`` problem names ``field.path``."""
    fields = []
    for problem in problems:
        path, sep, reason = problem.partition(": ")
        named = bool(sep and path and " " not in path)  # "spec.x: ..." names a field
        name = f"{field}.{path}" if named else field
        fields.append({"field": name, "location": "body", "reason": reason if named else problem})
    message = "; ".join(f"{f['field']}: {f['reason']}" for f in fields)
    return ApiError(422, "invalid_request", message, fields=fields)


def _policy(value: RotationPolicyManifest | str) -> RotationPolicy:
    """The one RotationPolicy in a manifest object (its schema already checked) or YAML text."""
    try:
        if isinstance(value, str):
            policies = policies_from_text(value, "policy")
            if len(policies) != 1:
                raise _invalid("policy", [f"expected one RotationPolicy, found {len(policies)}"])
            return policies[0]
        return policy_from_manifest(value.document())
    except PolicyFileError as exc:
        # Text errors already start with the source name ("policy: ..."); keep the reason.
        raise _invalid("policy", [e.removeprefix("policy: ") for e in exc.errors]) from exc
    except PolicyError as exc:
        raise _invalid("policy", exc.errors) from exc


@router.post(
    "/check",
    operation_id="rotation_check",
    response_model=RotationCheckBody,
    responses=UNSUPPORTED_MEDIA_TYPE,
)
@access(admin_only=False)
async def rotation_check(body: RotationCheckRequest) -> JSONResponse:
    """Can the policy's windows rotate a pool of ``nodes`` before its forced expiry?"""
    try:
        expire_after = parse_expire_after(body.expire_after)
    except DurationError as exc:
        raise _invalid("expire_after", [str(exc)]) from exc
    try:
        grace = parse_grace_period(body.termination_grace_period)
    except DurationError as exc:
        raise _invalid("termination_grace_period", [str(exc)]) from exc
    policy = _policy(body.policy)
    try:
        result = check(policy, CheckInputs(expire_after, grace, body.nodes))
    except PolicyError as exc:
        raise _invalid("policy", exc.errors) from exc
    return JSONResponse(result.report())


def _duration(value: str | None) -> timedelta | None:
    """A duration the schema already admitted (so one that parses, and is not negative)."""
    return None if value is None else parse_duration(value)


def _fleet_document(value: FleetFile | str) -> dict[str, Any]:
    """The fleet file for the loader: the object as validated, or the YAML text parsed (as the
    CLI parses ``--fleet``) and held to the same schema, so both forms obey the same rules."""
    if isinstance(value, FleetFile):
        return value.document()
    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError as exc:  # one line with the line and column, as the CLI says it
        raise _invalid("fleet", [describe_yaml_error(exc)]) from exc
    except (ValueError, RecursionError) as exc:
        # PyYAML raises ValueError for a timestamp that is no date (2024-02-30), and runs out
        # of stack on deeply nested text: both are the client's text, not the server's fault.
        raise _invalid("fleet", [f"not valid YAML: {exc}"]) from exc
    try:
        return fleet_document(parsed)
    except ValidationError as exc:
        errors = [{**error, "loc": ("body", "fleet", *error["loc"])} for error in exc.errors()]
        raise validation_error(errors, {"body": {"fleet": parsed}}) from None


def _policy_bounds(policy: RotationPolicy) -> None:
    """422 naming each of the policy's durations and instants a simulation cannot take (see the
    request's ``policy`` description): a run adds the durations to its instants, and computes
    window transitions up to the end of an exclusion."""
    surge = policy.surge
    durations = {
        "spec.ageThreshold": policy.age_threshold,
        "spec.surge.readyTimeout": surge.ready_timeout,
        "spec.surge.cooldownAfter": surge.cooldown_after,
        "spec.surge.failurePause": surge.failure_pause,
        "spec.surge.retryBackoff": surge.retry_backoff,
        "spec.surge.drainEstimate": surge.drain_estimate,
        "spec.surge.provisioningEstimate": surge.provisioning_estimate,
    }
    limit = timedelta(days=MAX_SIMULATE_POLICY_DAYS)
    problems = [
        f"{path}: at most {MAX_SIMULATE_POLICY_DAYS}d in a simulation"
        for path, value in durations.items()
        if value is not None and value > limit
    ]
    for index, exclusion in enumerate(policy.exclusions):
        for end, instant in (("start", exclusion.start), ("end", exclusion.end)):
            if not _in_simulated_years(instant):
                problems.append(
                    f"spec.exclusions[{index}].{end}: must be in the years {FIRST_YEAR} to "
                    f"{LAST_YEAR} (UTC) in a simulation"
                )
    if problems:
        raise _invalid("policy", problems)


def _in_simulated_years(instant: datetime) -> bool:
    """Whether ``instant`` falls in the years a simulation takes, in UTC."""
    try:
        return FIRST_YEAR <= instant.astimezone(UTC).year <= LAST_YEAR
    except OverflowError:  # an offset that takes the year 1 or 9999 off the calendar
        return False


def _not_selected(exc: PoolNotSelected) -> ApiError:
    """422: the policy's nodePoolSelector does not select the fleet's pool (named as the API's
    fields: the fleet file is the request's ``fleet``)."""
    return _invalid(
        "policy",
        [
            "spec.nodePoolSelector: does not select the fleet's labels "
            f"{exc.labels}; set fleet.fleet.labels to match it"
        ],
    )


def _too_long(seconds: float) -> ApiError:
    """503: the simulation ran past the app's wall-clock bound (not the client's input's fault)."""
    return ApiError(
        503,
        "simulation_too_long",
        f"the simulation did not finish within {seconds:g} s of wall time; simulate a shorter "
        "span or a smaller fleet, or run it with the CLI (fleetgate simulate has no such bound)",
    )


@router.post(
    "/simulate",
    operation_id="rotation_simulate",
    responses={
        503: {
            "model": ErrorBody,
            "description": "simulation_too_long: the run did not finish within the server's "
            "wall-clock bound; simulate a shorter span or a smaller fleet, or use the CLI.",
        },
        **UNSUPPORTED_MEDIA_TYPE,
    },
)
@access(admin_only=False)
async def rotation_simulate(request: Request, body: RotationSimulateRequest) -> JSONResponse:
    """Simulate the policy over the fleet: the document ``fleetgate simulate --format json``
    prints (bounded: at most ``MAX_SIMULATE_NODES`` nodes, ``MAX_SIMULATE_DAYS`` days, and
    the app's ``simulate_seconds`` of wall time, past which it is a 503)."""
    start = parse_instant(body.start, "start")  # the schema admits only instants it reads
    span = parse_duration(body.span)
    if span > timedelta(days=MAX_SIMULATE_DAYS):
        raise _invalid("span", [f"must be at most {MAX_SIMULATE_DAYS}d"])
    provisioning = _duration(body.env_provisioning)
    drain = _duration(body.env_drain)
    policy = _policy(body.policy)
    _policy_bounds(policy)
    try:
        fleet = load_fleet(_fleet_document(body.fleet), start)
    except FleetError as exc:
        raise _invalid("fleet", [str(exc)]) from exc
    inputs = SimulationInputs(policy, fleet, start, start + span, provisioning, drain)
    seconds: float = getattr(request.app.state, "simulate_seconds", SIMULATE_SECONDS)
    try:
        # CPU-bound: in a thread of its own, so the server keeps answering meanwhile, and
        # stopped when the bound passes, even in the middle of a long step (see bounded.py).
        result = await container_of(request).simulator().run_bounded(inputs, seconds)
    except PoolNotSelected as exc:
        raise _not_selected(exc) from exc
    except SimulationError as exc:
        raise _invalid("policy", [str(exc)]) from exc
    except RanTooLong:
        raise _too_long(seconds) from None
    return JSONResponse(result.document())
