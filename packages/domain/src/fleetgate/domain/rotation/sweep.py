"""The startup sweep (spec §7.9): undo what a dead controller left half-done outside an anchor.

Run once, before the first pass, over every pool. Anything that belongs to an anchored rotation
is left alone (the pass resumes it); everything else a rotation leaves behind is removed, and a
claim caught mid-rotation without an anchor is failed so its retry backoff applies.
"""

from __future__ import annotations

from datetime import datetime

from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.actions import (
    Action,
    AnnotateClaim,
    AnnotatePool,
    CountCompletion,
    DeletePlaceholder,
    Log,
)
from fleetgate.domain.rotation.cluster import PoolObservation
from fleetgate.domain.rotation.markers import unfreeze

_MIRROR_KEYS = (ann.ACTIVE_ROTATION_STATE, ann.DRAINING_AT, ann.SURGE_WAIT, ann.ROTATION_MODE)


def sweep(obs: PoolObservation, now: datetime) -> list[Action]:
    """The writes that clean one pool of leftovers not covered by its anchor."""
    anchor = obs.annotations.get(ann.ACTIVE_ROTATION) or None
    actions: list[Action] = []
    if anchor is None:
        stale = {k: None for k in _MIRROR_KEYS if k in obs.annotations}
        if stale:
            actions.append(AnnotatePool(obs.name, stale))
    for pod in obs.placeholders:
        if pod.labels.get(ann.SURGE_FOR) != anchor:
            actions.append(DeletePlaceholder(pod.namespace, pod.name))
    for node in obs.nodes:
        marked_for = node.annotations.get(ann.SURGE_FOR)
        orphan_freeze = marked_for is not None and marked_for != anchor
        orphan_cordon = marked_for is None and ann.CORDONED in node.annotations
        if orphan_freeze or orphan_cordon:
            actions.extend(unfreeze(node))
    for claim in obs.claims:
        state = claim.annotations.get(ann.CLAIM_STATE)
        if claim.name == anchor or state not in (ann.ClaimState.PENDING, ann.ClaimState.DRAINING):
            continue
        actions.append(CountCompletion("failure"))
        actions.append(
            AnnotateClaim(
                claim.name,
                {
                    ann.CLAIM_STATE: ann.ClaimState.FAILED.value,
                    ann.FAILED_AT: ann.format_timestamp(now),
                    ann.STARTED_AT: None,
                    ann.SURGE_CLAIM: None,
                },
            )
        )
        actions.append(
            Log(
                "startup sweep failed an un-anchored rotation",
                {"nodeclaim": claim.name, "state": state},
            )
        )
    return actions
