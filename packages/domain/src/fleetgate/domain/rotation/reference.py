"""The reference controller (node-rotation-controller, ``noderotation.io``) as a neighbour.

fleetgate reimplements that controller, so its users migrate by running both for a while. The two
must never rotate the same pool at once, and fleetgate must not mistake the reference's own
protections for an operator's. The reference keeps all its state on the cluster objects under the
``noderotation.io/`` prefix:

- the NodePool anchor ``active-rotation`` (the serial gate of an in-flight rotation);
- a NodeClaim ``state`` of ``pending`` or ``draining`` (a rotation in flight on that claim);
- on Nodes it froze or cordoned, ``surge-for``, ``do-not-disrupt-owned`` (its own
  ``karpenter.sh/do-not-disrupt``) and ``cordoned`` (its own ``spec.unschedulable``).

Any of these on a pool means "the reference is acting here": :func:`reference_activity` names the
first one found, and the start gate ``referenceControllerActive`` (gating.py) closes for it.
Once the operator says the reference is gone (the migration guide's last step), the markers are
stale and :func:`release_reference_markers` lists the writes that undo exactly what the
reference owned: the do-not-disrupt and the cordon it set, and its anchors; an operator's own
do-not-disrupt or cordon (no ``noderotation.io`` marker) is never touched.
"""

from __future__ import annotations

from fleetgate.domain.rotation.actions import (
    Action,
    AnnotateClaim,
    AnnotateNode,
    AnnotatePool,
    SetUnschedulable,
)
from fleetgate.domain.rotation.annotations import KARPENTER_DO_NOT_DISRUPT
from fleetgate.domain.rotation.cluster import PoolObservation

__all__ = [
    "REFERENCE_ACTIVE_ROTATION",
    "REFERENCE_CLAIM_STATE",
    "REFERENCE_CORDONED",
    "REFERENCE_DO_NOT_DISRUPT_OWNED",
    "REFERENCE_GROUP",
    "REFERENCE_IN_FLIGHT_STATES",
    "REFERENCE_LEASE",
    "REFERENCE_PREFIX",
    "REFERENCE_SURGE_FOR",
    "reference_activity",
    "release_reference_markers",
]

REFERENCE_GROUP = "noderotation.io"
REFERENCE_PREFIX = REFERENCE_GROUP + "/"
REFERENCE_LEASE = "node-rotation-controller.noderotation.io"
"""The reference's leader-election Lease (in its own namespace): the guide checks it is gone."""
REFERENCE_ACTIVE_ROTATION = REFERENCE_PREFIX + "active-rotation"
REFERENCE_CLAIM_STATE = REFERENCE_PREFIX + "state"
REFERENCE_IN_FLIGHT_STATES = frozenset({"pending", "draining"})
REFERENCE_SURGE_FOR = REFERENCE_PREFIX + "surge-for"
REFERENCE_DO_NOT_DISRUPT_OWNED = REFERENCE_PREFIX + "do-not-disrupt-owned"
REFERENCE_CORDONED = REFERENCE_PREFIX + "cordoned"
# Pool keys that describe the reference's in-flight rotation; cleared with its anchor.
_POOL_ROTATION_KEYS = (
    REFERENCE_ACTIVE_ROTATION,
    REFERENCE_PREFIX + "active-rotation-state",
    REFERENCE_PREFIX + "draining-at",
    REFERENCE_PREFIX + "surge-wait",
    REFERENCE_PREFIX + "rotation-mode",
)
_CLAIM_ROTATION_KEYS = (
    REFERENCE_CLAIM_STATE,
    REFERENCE_PREFIX + "started-at",
    REFERENCE_PREFIX + "surge-claim",
)


def reference_activity(obs: PoolObservation) -> str | None:
    """Why the reference controller is acting on this pool (object and marker), or None."""
    anchor = obs.annotations.get(REFERENCE_ACTIVE_ROTATION)
    if anchor:
        return f"NodePool {obs.name} carries {REFERENCE_ACTIVE_ROTATION}={anchor}"
    for claim in obs.claims:
        state = claim.annotations.get(REFERENCE_CLAIM_STATE)
        if state in REFERENCE_IN_FLIGHT_STATES:
            return f"NodeClaim {claim.name} carries {REFERENCE_CLAIM_STATE}={state}"
    for node in obs.nodes:
        for key in (REFERENCE_DO_NOT_DISRUPT_OWNED, REFERENCE_CORDONED, REFERENCE_SURGE_FOR):
            if key in node.annotations:
                return f"Node {node.name} carries {key}"
    return None


def release_reference_markers(obs: PoolObservation) -> list[Action]:
    """The writes that undo what the (now gone) reference controller owned on this pool."""
    actions: list[Action] = []
    for node in obs.nodes:
        patch: dict[str, str | None] = {}
        if REFERENCE_DO_NOT_DISRUPT_OWNED in node.annotations:
            patch[REFERENCE_DO_NOT_DISRUPT_OWNED] = None
            patch[KARPENTER_DO_NOT_DISRUPT] = None  # it was the reference's, not an operator's
        if REFERENCE_CORDONED in node.annotations:
            patch[REFERENCE_CORDONED] = None
            if node.unschedulable:
                actions.append(SetUnschedulable(node.name, False))
        if REFERENCE_SURGE_FOR in node.annotations:
            patch[REFERENCE_SURGE_FOR] = None
        if patch:
            actions.append(AnnotateNode(node.name, patch))
    for claim in obs.claims:
        stale = {k: None for k in _CLAIM_ROTATION_KEYS if k in claim.annotations}
        if stale:
            actions.append(AnnotateClaim(claim.name, stale))
    pool = {k: None for k in _POOL_ROTATION_KEYS if k in obs.annotations}
    if pool:
        actions.append(AnnotatePool(obs.name, pool))
    return actions
