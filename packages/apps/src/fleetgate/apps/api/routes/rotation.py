"""``POST /v1/rotation/check`` and ``/simulate``: ``fleetgate check`` and ``fleetgate simulate``
over HTTP, for any token."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta
from typing import Any

import yaml
from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from fleetgate.apps.api.auth import GuardedRoute, access, bearer_scheme
from fleetgate.apps.api.errors import ApiError
from fleetgate.apps.api.schemas import (
    ErrorBody,
    RotationCheckBody,
    RotationCheckRequest,
    RotationSimulateRequest,
)
from fleetgate.apps.api.schemas.policy import RotationPolicyManifest
from fleetgate.apps.api.schemas.rotation import (
    MAX_SIMULATE_DAYS,
    MAX_SIMULATE_NODES,
    SIMULATE_SECONDS,
)
from fleetgate.apps.check import check_report, parse_expire_after, parse_grace_period
from fleetgate.apps.policyfile import PolicyFileError, policies_from_text
from fleetgate.apps.simulate.fleet import FleetError, load_fleet, parse_instant
from fleetgate.apps.simulate.run import Inputs, SimulationError, simulate
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
        name = f"{field}.{path}" if sep and path and " " not in path else field
        fields.append({"field": name, "location": "body", "reason": reason if sep else problem})
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


@router.post("/check", operation_id="rotation_check", response_model=RotationCheckBody)
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
        report = check_report(policy, expire_after, grace, body.nodes)
    except PolicyError as exc:
        raise _invalid("policy", exc.errors) from exc
    return JSONResponse(report)


def _outside_the_calendar(field: str) -> ApiError:
    """422 for a simulation whose instants fall outside the years 1 to 9999."""
    return _invalid(
        field,
        [
            "start with the span and the fleet's durations reaches outside the years 1 to 9999; "
            "choose a start nearer today or shorter durations"
        ],
    )


class _TooSlow(Exception):
    """The simulation ran past the request's wall-clock bound."""


def _duration(field: str, value: str | None) -> timedelta | None:
    """A non-negative duration, or a 422 naming ``field``."""
    if value is None:
        return None
    try:
        parsed = parse_duration(value)
    except ValueError as exc:
        raise _invalid(field, [str(exc)]) from exc
    if parsed < timedelta(0):
        raise _invalid(field, ["must not be negative"])
    return parsed


def _fleet_document(value: dict[str, Any] | str) -> Any:
    """The fleet file, parsed, with its size checked before any node is generated."""
    if isinstance(value, str):
        try:
            value = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise _invalid("fleet", [f"not valid YAML: {exc}"]) from exc
    spec = value.get("fleet") if isinstance(value, dict) else None
    if isinstance(spec, dict):
        count = (
            (spec.get("generate") or {}).get("count")
            if isinstance(spec.get("generate"), dict)
            else None
        )
        listed = spec.get("nodes")
        size = len(listed) if isinstance(listed, list) else count
        if isinstance(size, int) and size > MAX_SIMULATE_NODES:
            where = (
                "fleet.fleet.nodes" if isinstance(listed, list) else "fleet.fleet.generate.count"
            )
            raise ApiError(
                422,
                "invalid_request",
                f"{where}: at most {MAX_SIMULATE_NODES} nodes can be simulated over the API "
                "(use the CLI for larger fleets)",
                fields=[{"field": where, "location": "body", "reason": "too many nodes"}],
            )
    return value


@router.post("/simulate", operation_id="rotation_simulate")
@access(admin_only=False)
async def rotation_simulate(body: RotationSimulateRequest) -> JSONResponse:
    """Simulate the policy over the fleet: the document ``fleetgate simulate --format json``
    prints (bounded: at most ``MAX_SIMULATE_NODES`` nodes, ``MAX_SIMULATE_DAYS`` days, and
    ``SIMULATE_SECONDS`` of wall time)."""
    try:
        start = parse_instant(body.start, "start")
    except FleetError as exc:
        raise _invalid("start", [str(exc).removeprefix("start: ")]) from exc
    span = _duration("span", body.span)
    assert span is not None
    if span <= timedelta(0) or span > timedelta(days=MAX_SIMULATE_DAYS):
        raise _invalid("span", [f"must be more than 0 and at most {MAX_SIMULATE_DAYS}d"])
    provisioning = _duration("env_provisioning", body.env_provisioning)
    drain = _duration("env_drain", body.env_drain)
    policy = _policy(body.policy)
    try:
        fleet = load_fleet(_fleet_document(body.fleet), start)
    except FleetError as exc:
        raise _invalid("fleet", [str(exc)]) from exc
    except OverflowError:
        raise _outside_the_calendar("fleet") from None
    try:
        end = start + span
    except OverflowError:
        raise _outside_the_calendar("span") from None
    inputs = Inputs(policy, fleet, start, end, provisioning, drain)
    began = time.monotonic()

    def progress(_: datetime) -> None:
        if time.monotonic() - began > SIMULATE_SECONDS:
            raise _TooSlow

    try:
        # CPU-bound: in a worker thread, so the server keeps answering meanwhile.
        doc = await asyncio.to_thread(simulate, inputs, progress)
    except SimulationError as exc:
        field = "span" if str(exc).startswith("--to") else "policy"
        raise _invalid(field, [str(exc)]) from exc
    except OverflowError:
        # An instant the run needs (a node's expiry, its grace period's end) is past 9999.
        raise _outside_the_calendar("fleet") from None
    except _TooSlow:
        raise _invalid(
            "span",
            [
                f"the simulation did not finish within {SIMULATE_SECONDS:.0f} s; simulate a "
                "shorter span or a smaller fleet"
            ],
        ) from None
    return JSONResponse(doc)
