"""When passes may be skipped: a pass says until when a look at an unchanged pool writes nothing.

A pass that wrote nothing says it of the pool it saw (``Step.quiet_until``). A pass that wrote
says it of the pool *as its own writes leave it* (``Step.settled_until``): the look-again pass a
real controller makes after writing would otherwise be a pass at which nothing can have changed.
That second promise is made only where the writes' effect is known without the cluster's help
(annotations, a cordon, a claim's deletion starting), never after creating or deleting a Pod
(the scheduler and Karpenter react to those), and it is checked by running the machine's own
``advance`` over the predicted pool, so it says exactly what that pass would decide.

Only the simulator uses this (a real controller simply requeues); it keeps virtual months cheap
while every pass that *could* act still happens, on the controller's own requeue grid.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.actions import (
    WRITES,
    Action,
    AnnotateClaim,
    AnnotateNode,
    AnnotatePool,
    DeleteClaim,
    SetUnschedulable,
)
from fleetgate.domain.rotation.cluster import NodeClaimView, NodeView, PoolObservation
from fleetgate.domain.rotation.context import Pass

_TICK = timedelta(microseconds=1)  # "strictly after": the first instant a strict test flips


def next_eligibility(p: Pass) -> datetime | None:
    """The first instant after now at which some claim could become eligible by time alone."""
    # A Pod's duration-valued do-not-disrupt runs out by time alone, too.
    return earliest(p.census.next_eligibility(p.now), p.census.opt_out_expiry(p.now))


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


Advance = Callable[[Pass, str], tuple[list[Action], "datetime | None"]]
_PREDICTABLE = (AnnotatePool, AnnotateClaim, AnnotateNode, SetUnschedulable, DeleteClaim)


def settled_anchored(
    p: Pass, anchor: str, actions: Sequence[Action], advance: Advance
) -> datetime | None:
    """Until when the pass after this one's ``actions`` would write nothing (see the module
    docstring; None: no promise, look again as requeued)."""
    writes = [a for a in actions if isinstance(a, WRITES)]
    if not writes or not all(isinstance(a, _PREDICTABLE) for a in writes):
        return None
    # The anchor the writes leave, found before the whole pool is predicted: a pass that ends
    # its rotation (the usual last write) needs no prediction.
    left = p.obs.annotations.get(ann.ACTIVE_ROTATION)
    for a in writes:
        if isinstance(a, AnnotatePool) and ann.ACTIVE_ROTATION in a.patch:
            left = a.patch[ann.ACTIVE_ROTATION]
    if (left or None) != anchor:
        return None  # the rotation ended or changed hands: the next pass is a start's
    after = predicted(p.obs, writes, p.now)
    q = replace(p, obs=after)
    more, _ = advance(q, anchor)
    if any(isinstance(a, WRITES) for a in more):
        return None
    return quiet_anchored(q, anchor)


def predicted(obs: PoolObservation, writes: Sequence[Action], now: datetime) -> PoolObservation:
    """``obs`` as the predictable ``writes`` leave it (a deletion starts at ``now``)."""
    pool = dict(obs.annotations)
    claims: dict[str, NodeClaimView] = {}
    nodes: dict[str, NodeView] = {}
    for a in writes:
        if isinstance(a, AnnotatePool):
            _merge(pool, a.patch)
        elif isinstance(a, AnnotateClaim | DeleteClaim):
            claim = claims.get(a.name) or obs.claim(a.name)
            if claim is None:
                continue  # the write fails (ObjectNotFound); the pass is interrupted anyway
            if isinstance(a, AnnotateClaim):
                claims[a.name] = replace(claim, annotations=_merged(claim.annotations, a.patch))
            elif claim.deleting_at is None:
                claims[a.name] = replace(claim, deleting_at=now)
        else:
            assert isinstance(a, AnnotateNode | SetUnschedulable)
            name = a.name if isinstance(a, AnnotateNode) else a.node
            node = nodes.get(name) or obs.node(name)
            if node is None:
                continue
            if isinstance(a, AnnotateNode):
                nodes[name] = replace(node, annotations=_merged(node.annotations, a.patch))
            else:
                nodes[name] = replace(node, unschedulable=a.unschedulable)
    return obs.with_changes(pool, claims, nodes)


def _merge(target: dict[str, str], patch: Mapping[str, str | None]) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value


def _merged(base: Mapping[str, str], patch: Mapping[str, str | None]) -> dict[str, str]:
    out = dict(base)
    _merge(out, patch)
    return out
