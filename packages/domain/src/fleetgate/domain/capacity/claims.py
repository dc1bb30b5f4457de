"""Namespace capacity claims: their values, their states and their transitions.

A claim reserves capacity for one namespace ahead of time. Its limits are summed into the cluster
row's ``claimed_*``, which shrinks what unclaimed namespaces may use; its namespace draws usage
from the claim instead of from the unclaimed pool.

Creating, growing, shrinking, expiring and deleting a claim each move the cluster row from the
namespace's share before to its share after (``accounting.py``; advisory overage stays on the
unclaimed side, capacity spec 10.5). The guard tests the state its own change produces (capacity
spec 6.3): every dimension the change *raises* must end with ``claimed + unclaimed_used <=
total``; a dimension the change does not raise is never refused.

Expiry is effective at ``expires_at``: from that instant a claim is not active for updates and
is no longer charged, whether or not a sweep has yet stored its new state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Final

from fleetgate.domain.capacity.accounting import (
    ClusterChange,
    capacity_denial,
    share,
    transition,
    unclaimed_share,
)
from fleetgate.domain.capacity.denials import Denial, DimensionDetail, Stage
from fleetgate.domain.capacity.dimensions import ALLOCATION, Resources
from fleetgate.domain.capacity.guards import CLAIM_GUARD, Guard
from fleetgate.domain.capacity.model import ClusterState, check_namespace
from fleetgate.domain.capacity.overage import overage

#: The longest a claim may be dated ahead: ten years (a claim is a crash backstop, not a lease
#: meant to outlive the deployment; the bound also keeps epoch arithmetic exact).
MAX_EXPIRES_IN_SECONDS: Final = 10 * 366 * 24 * 3600

LIMIT_FIELDS: Final = tuple(f"limit_{d}" for d in ALLOCATION)
EXPIRES_FIELD: Final = "expires_in_seconds"
#: The fields an update may name (its field mask).
UPDATE_FIELDS: Final = (*LIMIT_FIELDS, EXPIRES_FIELD)


class ClaimState(StrEnum):
    """A claim's coverage: ``active`` reserves and is charged; ``expired`` does neither."""

    ACTIVE = "active"
    EXPIRED = "expired"


class ClaimEnforcement(StrEnum):
    """How an active claim binds its own namespace (capacity spec 6.7).

    ``advisory`` (the default): the claim is always charged and a placement past its limit is
    admitted, with the dimensions it went over reported. ``hard``: the claim guard refuses it.
    """

    ADVISORY = "advisory"
    HARD = "hard"


def enforcement_of(value: object) -> ClaimEnforcement:
    """``value`` as a ClaimEnforcement; ValueError naming ``claims.enforcement`` otherwise."""
    for enforcement in ClaimEnforcement:
        if value == enforcement.value:
            return enforcement
    allowed = " or ".join(repr(e.value) for e in ClaimEnforcement)
    raise ValueError(f"claims.enforcement: must be {allowed}, got {value!r}")


@dataclass(frozen=True)
class ClaimCharge:
    """How the ledger charges a namespace's active claim for one admission.

    ``guard``: the guard the charge is made under (None: charged regardless of the limit);
    ``enforce``: whether that guard's refusal refuses the admission (False: the charge is made
    anyway and the overridden refusal reported as bypassed); ``reports_over_limit``: whether the
    admission reports the dimensions the charge took past the limit.
    """

    guard: Guard | None
    enforce: bool
    reports_over_limit: bool


def claim_charge(enforcement: ClaimEnforcement, enforce: bool) -> ClaimCharge:
    """The claim-charge decision for ``enforcement`` and the request's own ``enforce`` flag."""
    if enforcement is ClaimEnforcement.HARD:
        # An unenforced (ground-truth) write still charges the claim, reporting the bypass.
        return ClaimCharge(guard=CLAIM_GUARD, enforce=enforce, reports_over_limit=False)
    return ClaimCharge(guard=None, enforce=True, reports_over_limit=True)


class RefusalReason(StrEnum):
    """Why a claim operation was refused (capacity spec 6.8 maps each to an HTTP status)."""

    EXISTS = "exists"
    NO_CLUSTER_CAPACITY = "no_cluster_capacity"
    CAPACITY = "capacity"
    BELOW_USAGE = "below_usage"
    NOT_ACTIVE = "not_active"
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"


@dataclass(frozen=True)
class Claim:
    """One claim as stored: ``state`` is the stored coverage, ``coverage(now)`` the effective."""

    id: str
    namespace: str
    limit: Resources
    used: Resources
    state: ClaimState
    expires_at: datetime
    created_at: datetime
    updated_at: datetime

    def is_active(self, now: datetime) -> bool:
        """Active and not yet at its expiry instant: the claim reserves and is charged."""
        return self.state is ClaimState.ACTIVE and now < self.expires_at

    def is_due(self, now: datetime) -> bool:
        """Stored as active but past its expiry instant: the sweep has yet to expire it."""
        return self.state is ClaimState.ACTIVE and now >= self.expires_at

    def coverage(self, now: datetime) -> ClaimState:
        """The effective coverage at ``now`` (expired from ``expires_at`` on, swept or not)."""
        return ClaimState.ACTIVE if self.is_active(now) else ClaimState.EXPIRED

    def effective(self, now: datetime) -> Claim:
        """This claim as readers must see it at ``now``: with its effective coverage as state."""
        return replace(self, state=self.coverage(now))

    @property
    def overage(self) -> Resources:
        """Usage above the limit (advisory enforcement lets a namespace go over)."""
        return overage(self.used, self.limit)


@dataclass(frozen=True)
class ClaimRefusal:
    """A refused claim operation: the reason, a message, and the dimensions when they apply."""

    reason: RefusalReason
    message: str
    denial: Denial | None = None

    def as_dict(self) -> dict[str, object]:
        """The wire form: reason, message and any per-dimension detail."""
        out: dict[str, object] = {"reason": self.reason.value, "message": self.message}
        if self.denial is not None:
            out["dimensions"] = [d.as_dict() for d in self.denial.dimensions]
        return out


@dataclass(frozen=True)
class ClaimOutcome:
    """The result of a create or an update: the claim as it now is, or why it was refused.

    ``clamped`` is set when a cluster counter had drifted below what the transition moved and
    was floored at zero (the next reconcile pass repairs it). ``expired`` is a claim past its
    expiry that the write expired on its way, in its transaction (a create retiring the
    namespace's due claim, an update finding its claim due), refused or not: a change to report.
    """

    claim: Claim | None = None
    refusal: ClaimRefusal | None = None
    clamped: bool = False
    expired: Claim | None = None

    @property
    def ok(self) -> bool:
        """True when the operation was applied."""
        return self.claim is not None and self.refusal is None


@dataclass(frozen=True)
class ClaimDeletion:
    """The result of a delete: ``deleted`` false when there was no such claim (double delete).

    ``claim`` is the claim as it was before deletion; ``returned`` the usage that went back to
    the unclaimed pool (zero for an already expired claim, whose usage went back at expiry).
    """

    deleted: bool
    claim: Claim | None = None
    returned: Resources = field(default_factory=Resources)
    clamped: bool = False


def check_expires_in(value: object, field_name: str = EXPIRES_FIELD) -> int:
    """Return ``value`` if it is whole seconds in 1..MAX, else raise naming the field."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{field_name}: must be an integer number of seconds, got {value!r}")
    if value < 1:
        raise ValueError(f"{field_name}: must be at least 1 second, got {value}")
    if value > MAX_EXPIRES_IN_SECONDS:
        raise ValueError(f"{field_name}: must be at most {MAX_EXPIRES_IN_SECONDS}, got {value}")
    return value


@dataclass(frozen=True)
class ClaimRequest:
    """A new claim: ``limit`` reserved for ``namespace`` until ``expires_in_seconds`` from now."""

    namespace: str
    limit: Resources
    expires_in_seconds: int

    def __post_init__(self) -> None:
        check_namespace(self.namespace)
        if not isinstance(self.limit, Resources):
            raise ValueError("limit: must be a Resources value")
        check_expires_in(self.expires_in_seconds)


@dataclass(frozen=True)
class ClaimUpdate:
    """A field-masked change: only the fields given (not ``None``) change.

    Limits may go up (an admission against the cluster), down to the claim's usage, or to zero
    and back; ``expires_in_seconds`` re-dates the claim from now (shortening is allowed).
    """

    limit_cpus: int | None = None
    limit_memory_mb: int | None = None
    limit_disk_gb: int | None = None
    expires_in_seconds: int | None = None

    def __post_init__(self) -> None:
        for name in LIMIT_FIELDS:
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name}: must be an integer, got {value!r}")
            if value < 0:
                raise ValueError(f"{name}: must not be negative, got {value}")
        if self.expires_in_seconds is not None:
            check_expires_in(self.expires_in_seconds)
        if not self.fields:
            raise ValueError(f"fields: name at least one of {', '.join(UPDATE_FIELDS)}")

    @property
    def fields(self) -> frozenset[str]:
        """The field mask: the names of the fields this update sets."""
        return frozenset(name for name in UPDATE_FIELDS if getattr(self, name) is not None)

    def limit_after(self, limit: Resources) -> Resources:
        """``limit`` with the masked dimensions replaced."""
        new = {d: getattr(self, f"limit_{d}") for d in ALLOCATION}
        return Resources(*(limit.get(d) if new[d] is None else new[d] for d in ALLOCATION))


# --- the transitions ------------------------------------------------------------------------


@dataclass(frozen=True)
class Created:
    """A create the cluster admits: the claim's values and the cluster row afterwards."""

    limit: Resources
    used: Resources
    expires_at: datetime
    cluster: ClusterChange


def plan_create(
    request: ClaimRequest, cluster: ClusterState, migrated: Resources, now: datetime
) -> Created | ClaimRefusal:
    """Admit a new claim against the cluster, migrating the namespace's usage into it.

    ``migrated`` is the namespace's current usage (read from the placements under the cluster
    row's lock). The namespace goes from the unclaimed share to the claim's share; the claim
    starts with ``used = migrated``, which may exceed its limit (the excess stays overage).
    """
    change = transition(
        cluster, unclaimed_share(migrated), share(request.limit, migrated, active=True)
    )
    denial = capacity_denial(cluster, change, request.limit.as_dict())
    if denial is not None:
        return ClaimRefusal(
            RefusalReason.CAPACITY,
            f"namespace claim for {request.namespace} does not fit the cluster: "
            + denial.describe(),
            denial,
        )
    return Created(
        limit=request.limit,
        used=migrated,
        expires_at=now + timedelta(seconds=request.expires_in_seconds),
        cluster=change,
    )


@dataclass(frozen=True)
class Updated:
    """An update that may be applied: the claim's new limit and expiry, the cluster row after."""

    limit: Resources
    expires_at: datetime
    cluster: ClusterChange | None


def _below_usage(claim: Claim, new_limit: Resources) -> Denial | None:
    shrunk_below = [
        d
        for d in ALLOCATION
        if new_limit.get(d) < claim.limit.get(d) and claim.used.get(d) > new_limit.get(d)
    ]
    if not shrunk_below:
        return None
    return Denial(
        stage=Stage.CLAIM,
        dimensions=tuple(
            DimensionDetail(
                dimension=d,
                limit=float(new_limit.get(d)),
                used=float(claim.used.get(d)),
                requested=0.0,
                exceeded=True,
            )
            for d in shrunk_below
        ),
    )


def plan_update(
    claim: Claim, update: ClaimUpdate, cluster: ClusterState | None, now: datetime
) -> Updated | ClaimRefusal:
    """Apply a field-masked update to an active claim, or say why not.

    A claim past ``expires_at`` is ``not_active``. A shrink goes no lower than current usage
    (``below_usage`` names the dimensions). A grow is an admission against the cluster with
    nothing migrated (``capacity``). Without a cluster row a grow is ``no_cluster_capacity``;
    a shrink or a re-date needs no cluster row.
    """
    if not claim.is_active(now):
        return ClaimRefusal(
            RefusalReason.NOT_ACTIVE, f"namespace claim {claim.id} has expired and cannot change"
        )
    new_limit = update.limit_after(claim.limit)
    below = _below_usage(claim, new_limit)
    if below is not None:
        return ClaimRefusal(
            RefusalReason.BELOW_USAGE,
            f"namespace claim {claim.id} cannot shrink below its usage: " + below.describe(),
            below,
        )
    expires_at = (
        claim.expires_at
        if update.expires_in_seconds is None
        else now + timedelta(seconds=update.expires_in_seconds)
    )
    if new_limit == claim.limit:
        return Updated(new_limit, expires_at, None)
    grows = any(new_limit.get(d) > claim.limit.get(d) for d in ALLOCATION)
    if cluster is None:
        if grows:
            return ClaimRefusal(
                RefusalReason.NO_CLUSTER_CAPACITY,
                "the cluster row is missing: nothing to grow into",
            )
        return Updated(new_limit, expires_at, None)
    change = transition(
        cluster,
        share(claim.limit, claim.used, active=True),
        share(new_limit, claim.used, active=True),
    )
    deltas = {d: new_limit.get(d) - claim.limit.get(d) for d in ALLOCATION}
    denial = capacity_denial(cluster, change, deltas)
    if denial is not None:
        return ClaimRefusal(
            RefusalReason.CAPACITY,
            f"namespace claim {claim.id} cannot grow: " + denial.describe(),
            denial,
        )
    return Updated(new_limit, expires_at, change)


def plan_release(claim: Claim, cluster: ClusterState) -> ClusterChange:
    """The cluster row after an active claim stops covering its namespace (expiry or delete).

    The claim's limits leave ``claimed_*`` and its usage returns to the unclaimed pool. This
    never raises a dimension beyond what the usage already committed, so it is never refused.
    """
    return transition(
        cluster, share(claim.limit, claim.used, active=True), unclaimed_share(claim.used)
    )


def due_for_expiry(claims: list[Claim], now: datetime) -> list[Claim]:
    """The claims the sweep must expire now: stored active, at or past ``expires_at``."""
    return [c for c in claims if c.is_due(now)]


def expires_in_seconds(claim: Claim, now: datetime) -> int:
    """Whole seconds until the claim expires (0 once it has), for views and events."""
    return max(0, math.ceil((claim.expires_at - now).total_seconds()))


__all__ = [
    "EXPIRES_FIELD",
    "LIMIT_FIELDS",
    "MAX_EXPIRES_IN_SECONDS",
    "UPDATE_FIELDS",
    "Claim",
    "ClaimCharge",
    "ClaimDeletion",
    "ClaimEnforcement",
    "ClaimOutcome",
    "ClaimRefusal",
    "ClaimRequest",
    "ClaimState",
    "ClaimUpdate",
    "Created",
    "RefusalReason",
    "Updated",
    "check_expires_in",
    "claim_charge",
    "due_for_expiry",
    "enforcement_of",
    "expires_in_seconds",
    "plan_create",
    "plan_release",
    "plan_update",
]
