"""When passes may be skipped: a pass that wrote nothing says until when nothing can change.

Only the simulator uses this (a real controller simply requeues); it keeps virtual months cheap
while every pass that *could* act still happens, on the controller's own requeue grid.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.context import Pass
from fleetgate.domain.rotation.disruption import opt_out_expiry
from fleetgate.domain.rotation.selection import retry_backoff

_TICK = timedelta(microseconds=1)  # "strictly after": the first instant a strict test flips


def next_eligibility(p: Pass) -> datetime | None:
    """The first instant after now at which some claim could become eligible by time alone."""
    rules = p.policy.selection
    opted = p.opted
    instants = []
    for claim in p.obs.claims:
        state = claim.annotations.get(ann.CLAIM_STATE, "")
        if claim.deleting or not claim.ready or claim.name in opted:
            continue
        if state not in ("", ann.ClaimState.FAILED):
            continue
        if rules.override is not None:
            trigger = claim.created_at + rules.override + _TICK
        elif claim.expire_after is None:
            continue
        else:
            lead = p.policy.lead_time_for(claim.termination_grace_period)
            trigger = claim.created_at + claim.expire_after - lead + _TICK
        if state == ann.ClaimState.FAILED:
            failed_at = ann.read_timestamp(claim.annotations, ann.FAILED_AT)
            count = ann.parse_retry_count(claim.annotations.get(ann.RETRY_COUNT))
            if failed_at is not None:
                trigger = max(trigger, failed_at + retry_backoff(rules.retry_backoff, count))
        if trigger > p.now:
            instants.append(trigger)
    # A Pod's duration-valued do-not-disrupt runs out by time alone, too.
    return earliest(min(instants, default=None), opt_out_expiry(p.obs.pods, p.now))


def quiet_anchored(p: Pass, anchor: str) -> datetime | None:
    """Until when an anchored rotation waits on the cluster alone (see ``Step.quiet_until``)."""
    claim = p.obs.claim(anchor)
    if claim is None:
        return p.now
    state = claim.annotations.get(ann.CLAIM_STATE, "")
    if state == ann.ClaimState.DRAINING and claim.deleting_at is not None:
        stuck_at = claim.deleting_at + p.policy.drain_bound + _TICK
        return stuck_at if stuck_at > p.now else None
    if state == ann.ClaimState.PENDING:
        started = ann.read_timestamp(claim.annotations, ann.STARTED_AT)
        if started is None:
            return p.now
        until = started + p.policy.ready_timeout + _TICK
        freeze = ann.read_timestamp(p.obs.annotations, ann.FREEZE)
        if freeze is not None and p.now < freeze:
            until = min(until, freeze)
        return until
    return p.now


def gate_change(p: Pass) -> datetime | None:
    """The next window or exclusion transition: the reported gate may change there."""
    return p.policy.schedule.next_transition(p.now)


def earliest(*instants: datetime | None) -> datetime | None:
    """The earliest of the given instants (None when none is given)."""
    return min((i for i in instants if i is not None), default=None)
