"""A pass over a pool with a rotation under way: move the anchored rotation on (spec §7.3).

The anchored claim's own state annotation says where the rotation stands: pending (a surge being
provisioned, pending.py), draining (the old claim's deletion), failed (retry or repair), expired;
a claim that is gone ended the rotation, drained or not.
"""

from __future__ import annotations

from fleetgate.domain.durations import format_duration
from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.actions import (
    ROTATE_NODE,
    Action,
    AnnotatePool,
    Announce,
    CountCompletion,
    DeleteClaim,
    Log,
    ObserveDuration,
)
from fleetgate.domain.rotation.cluster import NodeClaimView
from fleetgate.domain.rotation.constants import LONG_REQUEUE, SHORT_REQUEUE
from fleetgate.domain.rotation.context import CLEAR_ANCHOR, Pass
from fleetgate.domain.rotation.estimates import OBSERVED_DRAIN, append_sample
from fleetgate.domain.rotation.gating import retry_gates
from fleetgate.domain.rotation.pending import Outcome, advance_failed, pending


def advance(p: Pass, name: str) -> Outcome:
    """Move the anchored rotation of ``name`` on (spec §7.3)."""
    claim = p.obs.claim(name)
    if claim is None:
        return _claim_gone(p, name)
    state = claim.annotations.get(ann.CLAIM_STATE, "")
    if state in ("", ann.ClaimState.PENDING):
        return pending(p, claim)
    if state == ann.ClaimState.DRAINING:
        return _draining(p, claim)
    if state == ann.ClaimState.FAILED:
        return advance_failed(p, claim, retry_gates(p, claim) is None)
    if state == ann.ClaimState.EXPIRED:
        return [*p.release(name), AnnotatePool(p.obs.name, dict(CLEAR_ANCHOR))], None
    return [
        Log(
            "anchored claim has an unknown state; holding",
            {"nodeclaim": name, "state": state},
            dedup=f"unknown:{state}",
        )
    ], p.now + LONG_REQUEUE


def _draining(p: Pass, claim: NodeClaimView) -> Outcome:
    """Keep the pool's mirror saying draining, and the old claim's deletion asked for."""
    actions: list[Action] = []
    pool = p.obs.annotations
    if pool.get(ann.ACTIVE_ROTATION_STATE) != ann.MIRROR_DRAINING or ann.DRAINING_AT not in pool:
        patch: dict[str, str | None] = {ann.ACTIVE_ROTATION_STATE: ann.MIRROR_DRAINING}
        if ann.DRAINING_AT not in pool:
            patch[ann.DRAINING_AT] = p.stamp
        actions.append(AnnotatePool(p.obs.name, patch))
    if not claim.deleting:
        actions.append(DeleteClaim(claim.name))
    return actions, p.now + SHORT_REQUEUE


def _claim_gone(p: Pass, name: str) -> Outcome:
    """The anchored claim is gone: drained (a completed rotation) or expired before that."""
    host = next((n.name for n in p.census.surge_hosts(name, p.obs)), None)
    actions = p.release(name)
    if p.obs.annotations.get(ann.ACTIVE_ROTATION_STATE) != ann.MIRROR_DRAINING:
        actions += [
            CountCompletion("expired"),
            AnnotatePool(p.obs.name, dict(CLEAR_ANCHOR)),
            Log("rotation ended: the claim expired before it was drained", {"nodeclaim": name}),
        ]
        return actions, None
    return actions + _completed(p, name, host), None


def _completed(p: Pass, name: str, host: str | None) -> list[Action]:
    """A drained rotation's end: clear the anchor, record the drain, say so."""
    draining_at = ann.read_timestamp(p.obs.annotations, ann.DRAINING_AT)
    drain = p.now - draining_at if draining_at is not None else None
    patch: dict[str, str | None] = {**CLEAR_ANCHOR, ann.LAST_ROTATION_AT: p.stamp}
    mode = p.obs.annotations.get(ann.ROTATION_MODE) or "surge"
    fields: dict[str, object] = {
        "nodeclaim": name,
        "mode": mode,
        "surgeNode": host,
        "surgeWait": p.obs.annotations.get(ann.SURGE_WAIT),
    }
    observed: list[Action] = []
    if drain is not None:
        patch[OBSERVED_DRAIN] = append_sample(p.obs.annotations, OBSERVED_DRAIN, drain)
        fields["drain"] = format_duration(drain)
        observed.append(ObserveDuration("drain", drain.total_seconds()))
    return [
        CountCompletion("success"),
        AnnotatePool(p.obs.name, patch),
        *observed,
        Log("rotation complete", fields),
        Announce(
            "RotationCompleted",
            f"NodeClaim {name} rotated ({mode})",
            p.obs.name,
            action=ROTATE_NODE,
        ),
    ]
