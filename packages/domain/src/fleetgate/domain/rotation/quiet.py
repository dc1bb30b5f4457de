"""When passes may be skipped: a pass that wrote nothing says until when nothing can change.

Only the simulator uses this (a real controller simply requeues); it keeps virtual months cheap
while every pass that *could* act still happens, on the controller's own requeue grid.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.census import eligibility_instant, may_become_eligible
from fleetgate.domain.rotation.context import Pass
from fleetgate.domain.rotation.disruption import opt_out_expiry

_TICK = timedelta(microseconds=1)  # "strictly after": the first instant a strict test flips


def next_eligibility(p: Pass) -> datetime | None:
    """The first instant after now at which some claim could become eligible by time alone."""
    if p.cache is not None:
        # A Pod's duration-valued do-not-disrupt runs out by time alone, too.
        return earliest(p.cache.next_eligibility(p.now), p.cache.opt_out_expiry(p.now))
    rules = p.policy.selection
    opted = p.opted
    instants = []
    for claim in p.views:
        if not may_become_eligible(claim, claim.name in opted):
            continue
        trigger = eligibility_instant(claim, rules)
        if trigger is not None and trigger > p.now:
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
