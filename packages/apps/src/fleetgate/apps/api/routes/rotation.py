"""``POST /v1/rotation/check``: the derivation of ``fleetgate check``, over HTTP, for any token."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from fleetgate.apps.api.auth import GuardedRoute, access, bearer_scheme
from fleetgate.apps.api.errors import ApiError
from fleetgate.apps.api.schemas import ErrorBody, RotationCheckBody, RotationCheckRequest
from fleetgate.apps.check import check_report, parse_expire_after, parse_grace_period
from fleetgate.apps.policyfile import PolicyFileError, policies_from_text
from fleetgate.domain.durations import DurationError
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


def _policy(value: dict[str, Any] | str) -> RotationPolicy:
    """The one RotationPolicy in a manifest object or YAML text."""
    try:
        if isinstance(value, str):
            policies = policies_from_text(value, "policy")
            if len(policies) != 1:
                raise _invalid("policy", [f"expected one RotationPolicy, found {len(policies)}"])
            return policies[0]
        return policy_from_manifest(value)
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
