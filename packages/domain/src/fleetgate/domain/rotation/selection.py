"""Candidate selection (spec §6): who is eligible, why the others are not, and who goes first.

A pool's NodeClaims are seen through :class:`ClaimView`. Each claim falls in exactly one census
bucket — the first eligibility check it fails, in a fixed order — so "why is nothing rotating?"
always has an answer. Among the eligible, the earliest forced-expiry deadline goes first.
Per-claim ``expireAfter`` and ``terminationGracePeriod`` are authoritative (reference #54): a claim
created under an older template keeps its own deadline.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from fleetgate.domain.rotation.annotations import (
    CLAIM_STATE,
    DO_NOT_DISRUPT_OWNED,
    FAILED_AT,
    KARPENTER_DO_NOT_DISRUPT,
    RETRY_COUNT,
    TRUE,
    ClaimState,
    parse_retry_count,
    read_timestamp,
)
from fleetgate.domain.rotation.constants import BACKOFF_CAP_SHIFT, DRAIN_FALLBACK

__all__ = [
    "DRIFTED_DUE",
    "Bucket",
    "Census",
    "ClaimView",
    "DriftRule",
    "SelectionRules",
    "classify",
    "deadline",
    "drift_rule",
    "eligibility_instant",
    "is_opted_out",
    "is_short_lead",
    "is_triggered",
    "lead_time_for",
    "may_become_eligible",
    "opted_out_claims",
    "order",
    "order_key",
    "pick",
    "retry_backoff",
    "take_census",
    "trigger_instant",
]


@dataclass(frozen=True)
class ClaimView:
    """What selection needs to know about one NodeClaim of the pool."""

    name: str
    created_at: datetime
    expire_after: timedelta | None = None
    """The claim's own ``spec.expireAfter``; None means ``Never``."""
    tgp: timedelta | None = None
    """The claim's own ``spec.terminationGracePeriod``; None when unset."""
    deleting: bool = False
    """Whether the claim has a deletionTimestamp."""
    ready: bool = True
    """Whether its Ready condition is True (absent, Unknown or False all mean not ready)."""
    node_name: str | None = None
    annotations: Mapping[str, str] = field(default_factory=dict, hash=False)
    disruption_reason: str | None = None
    """Karpenter's ``DisruptionReason`` condition (True): it has chosen to replace the claim."""
    node_disrupted: bool = False
    """The claim's Node carries Karpenter's ``karpenter.sh/disrupted`` taint."""
    drifted: bool = False
    """Karpenter's ``Drifted`` condition is True: Karpenter means to replace the claim itself."""

    @property
    def karpenter_disrupting(self) -> bool:
        """Karpenter is already replacing this claim: picking it would replace it twice."""
        return self.node_disrupted or self.disruption_reason is not None

    @property
    def state(self) -> str:
        """The rotation state annotation ("" when absent)."""
        return self.annotations.get(CLAIM_STATE, "")


@dataclass(frozen=True)
class SelectionRules:
    """The resolved policy values selection reads (built by ``ResolvedPolicy.selection``)."""

    lead_time_base: timedelta
    """K·P + readyTimeout + Buffer; a claim's own tGP is added per claim."""
    retry_backoff: timedelta
    override: timedelta | None = None
    """An explicit ageThreshold; None means ``auto``."""
    rotate_drifted: bool = False
    """Whether drifted claims are fleetgate's to rotate at once (default: Karpenter's own until
    they fall due, see :class:`DriftRule`)."""


class Bucket(StrEnum):
    """Census buckets: the first eligibility check a claim fails (or ``Eligible``)."""

    OPTED_OUT = "OptedOut"
    DELETING = "Deleting"
    KARPENTER_DISRUPTING = "KarpenterDisrupting"
    DRIFTED = "Drifted"
    NOT_READY = "NotReady"
    IN_FLIGHT = "InFlight"
    TERMINAL = "Terminal"
    IN_BACKOFF = "InBackoff"
    NOT_TRIGGERED = "NotTriggered"
    ELIGIBLE = "Eligible"


class DriftRule(StrEnum):
    """Why a drifted claim is fleetgate's to rotate after all (it is never left to its expiry).

    Karpenter often does not act on drift (a NodePool budget with ``reasons: [Drifted]`` and
    ``nodes: "0"``, or a replacement that keeps failing); a drifted claim left to it would run to
    its forced expiry outside every window. So it is Karpenter's only until it falls due by the
    same age threshold as any other claim.
    """

    DUE = "driftedDue"
    """Drifted, not yet replaced by Karpenter, and old enough to rotate: rotated like any other."""
    ROTATE_DRIFTED = "rotateDrifted"
    """The policy sets ``rotateDrifted``: drifted claims are fleetgate's from the start."""


@dataclass(frozen=True)
class Census:
    """How many of the pool's claims fell in each bucket; the buckets partition ``total``.

    ``drifted_due`` is not a bucket: it counts the drifted claims (in whichever bucket after
    ``Drifted`` they fell) that are fleetgate's because they fell due (``DriftRule.DUE``).
    """

    counts: Mapping[Bucket, int] = field(default_factory=dict, hash=False)
    drifted_due: int = 0

    @property
    def total(self) -> int:
        """Every claim counted."""
        return sum(self.counts.values())

    @property
    def eligible(self) -> int:
        """Claims that may be picked now (the ``candidates`` gauge)."""
        return self.counts.get(Bucket.ELIGIBLE, 0)

    def as_dict(self) -> dict[str, int]:
        """``{"Total": n, "Eligible": n, "OptedOut": n, ...}`` with every bucket present, and
        ``DriftedDue`` after them when some drifted claim fell due."""
        out = {"Total": self.total} | {b.value: self.counts.get(b, 0) for b in _CENSUS_ORDER}
        if self.drifted_due:
            out[DRIFTED_DUE] = self.drifted_due
        return out


DRIFTED_DUE = "DriftedDue"
"""The census key counting drifted claims fleetgate took over because they fell due."""


_CENSUS_ORDER = (
    Bucket.ELIGIBLE,
    Bucket.OPTED_OUT,
    Bucket.DELETING,
    Bucket.KARPENTER_DISRUPTING,
    Bucket.DRIFTED,
    Bucket.NOT_READY,
    Bucket.IN_FLIGHT,
    Bucket.TERMINAL,
    Bucket.IN_BACKOFF,
    Bucket.NOT_TRIGGERED,
)


def is_opted_out(node_annotations: Mapping[str, str]) -> bool:
    """An operator opt-out: ``karpenter.sh/do-not-disrupt`` exactly "true" that we did not set."""
    return (
        node_annotations.get(KARPENTER_DO_NOT_DISRUPT) == TRUE
        and DO_NOT_DISRUPT_OWNED not in node_annotations
    )


def opted_out_claims(
    claims: Iterable[ClaimView], node_annotations: Mapping[str, Mapping[str, str]]
) -> frozenset[str]:
    """Names of claims whose Node (by ``node_name``; pool nodes only) is opted out."""
    return frozenset(
        claim.name
        for claim in claims
        if claim.node_name is not None
        and claim.node_name in node_annotations
        and is_opted_out(node_annotations[claim.node_name])
    )


def retry_backoff(base: timedelta, retry_count: int) -> timedelta:
    """Backoff after ``retry_count`` failures: base·2^min(max(rc−1, 0), 3) (1x, 1x, 2x, 4x, 8x)."""
    doublings: int = min(max(retry_count - 1, 0), BACKOFF_CAP_SHIFT)
    return base * (1 << doublings)


def lead_time_for(base: timedelta, claim_tgp: timedelta | None) -> timedelta:
    """A claim's lead time: the base plus its own tGP (the 1h fallback when unset)."""
    return base + (claim_tgp if claim_tgp is not None else DRAIN_FALLBACK)


def deadline(claim: ClaimView) -> datetime | None:
    """The claim's forced-expiry instant ``creationTimestamp + expireAfter``; None for Never."""
    return None if claim.expire_after is None else claim.created_at + claim.expire_after


def is_triggered(claim: ClaimView, now: datetime, rules: SelectionRules) -> bool:
    """Whether the claim is old enough to rotate (ignores readiness and state)."""
    age = now - claim.created_at
    if rules.override is not None:
        return age > rules.override  # an override selects even expireAfter: Never
    if claim.expire_after is None:
        return False
    return age > claim.expire_after - lead_time_for(rules.lead_time_base, claim.tgp)


_TICK = timedelta(microseconds=1)  # "strictly after": the first instant a strict test flips


def trigger_instant(claim: ClaimView, rules: SelectionRules) -> datetime | None:
    """The first instant at which ``is_triggered`` holds for ``claim`` (None: never)."""
    if rules.override is not None:
        return claim.created_at + rules.override + _TICK
    if claim.expire_after is None:
        return None
    lead = lead_time_for(rules.lead_time_base, claim.tgp)
    return claim.created_at + claim.expire_after - lead + _TICK


def eligibility_instant(claim: ClaimView, rules: SelectionRules) -> datetime | None:
    """The instant from which ``claim`` is eligible by time alone (age threshold passed and any
    retry backoff over), ignoring readiness, state and opt-out; None when age never triggers."""
    trigger = trigger_instant(claim, rules)
    if trigger is None:
        return None
    if claim.state == ClaimState.FAILED:
        failed_at = read_timestamp(claim.annotations, FAILED_AT)
        count = parse_retry_count(claim.annotations.get(RETRY_COUNT))
        if failed_at is not None:
            trigger = max(trigger, failed_at + retry_backoff(rules.retry_backoff, count))
    return trigger


def may_become_eligible(claim: ClaimView, opted: bool) -> bool:
    """Whether only time stands between ``claim`` and eligibility (its state lets it rotate)."""
    if claim.deleting or not claim.ready or opted:
        return False
    return claim.state in ("", ClaimState.FAILED)


def classify(
    claim: ClaimView, now: datetime, rules: SelectionRules, opted_out: frozenset[str] = frozenset()
) -> Bucket:
    """The census bucket of one claim: the first eligibility check it fails, in spec order."""
    if claim.name in opted_out:
        return Bucket.OPTED_OUT
    if claim.deleting:
        return Bucket.DELETING
    if claim.karpenter_disrupting:
        return Bucket.KARPENTER_DISRUPTING
    if claim.drifted and not rules.rotate_drifted and not is_triggered(claim, now, rules):
        return Bucket.DRIFTED  # Karpenter's while that is safe; see DriftRule
    if not claim.ready:
        return Bucket.NOT_READY
    state = claim.state
    if state == ClaimState.FAILED:
        if not _backoff_elapsed(claim, now, rules.retry_backoff):
            return Bucket.IN_BACKOFF
    elif state == ClaimState.EXPIRED:
        return Bucket.TERMINAL
    elif state != "":
        return Bucket.IN_FLIGHT  # pending, draining, or anything unknown
    if not is_triggered(claim, now, rules):
        return Bucket.NOT_TRIGGERED
    return Bucket.ELIGIBLE


def drift_rule(claim: ClaimView, bucket: Bucket, rules: SelectionRules) -> DriftRule | None:
    """Which rule makes a drifted claim in ``bucket`` fleetgate's (None: not drifted, or still
    Karpenter's: opted out, deleting, being replaced, or not yet due)."""
    if not claim.drifted or bucket in _KARPENTERS:
        return None
    return DriftRule.ROTATE_DRIFTED if rules.rotate_drifted else DriftRule.DUE


_KARPENTERS = frozenset(
    (Bucket.OPTED_OUT, Bucket.DELETING, Bucket.KARPENTER_DISRUPTING, Bucket.DRIFTED)
)


def _backoff_elapsed(claim: ClaimView, now: datetime, base: timedelta) -> bool:
    """A failed claim may be retried; a missing or malformed failed-at counts as elapsed."""
    failed_at = read_timestamp(claim.annotations, FAILED_AT)
    if failed_at is None:
        return True
    count = parse_retry_count(claim.annotations.get(RETRY_COUNT))
    return now - failed_at >= retry_backoff(base, count)


def take_census(
    claims: Iterable[ClaimView],
    now: datetime,
    rules: SelectionRules,
    opted_out: frozenset[str] = frozenset(),
) -> Census:
    """Count the pool's claims per bucket."""
    counts: Counter[Bucket] = Counter()
    due = 0
    for c in claims:
        bucket = classify(c, now, rules, opted_out)
        counts[bucket] += 1
        due += drift_rule(c, bucket, rules) is DriftRule.DUE
    return Census(counts, due)


def order_key(claim: ClaimView, rules: SelectionRules) -> tuple[int, datetime, datetime, str]:
    """Claims with a deadline first (by deadline), then by creation time and name."""
    due = deadline(claim) if rules.override is None else None
    return (
        (0, due, claim.created_at, claim.name)
        if due is not None
        else (1, claim.created_at, claim.created_at, claim.name)
    )


def order(claims: Iterable[ClaimView], rules: SelectionRules) -> list[ClaimView]:
    """Earliest deadline first (auto mode; claims with one first), then oldest, then name."""
    return sorted(claims, key=lambda claim: order_key(claim, rules))


def pick(
    claims: Iterable[ClaimView],
    now: datetime,
    rules: SelectionRules,
    opted_out: frozenset[str] = frozenset(),
) -> ClaimView | None:
    """The claim to rotate next, or None when no claim is eligible."""
    eligible = [c for c in claims if classify(c, now, rules, opted_out) is Bucket.ELIGIBLE]
    ordered = order(eligible, rules)
    return ordered[0] if ordered else None


def is_short_lead(claim: ClaimView, lead_time_base: timedelta) -> bool:
    """Layer 3: the claim's whole life is within its lead time, so its chances are already short.

    Uses the auto lead time even under an ageThreshold override; such a claim is still rotated,
    best-effort, and reported (``ShortLead``).
    """
    if claim.deleting or claim.expire_after is None:
        return False
    return claim.expire_after <= lead_time_for(lead_time_base, claim.tgp)
