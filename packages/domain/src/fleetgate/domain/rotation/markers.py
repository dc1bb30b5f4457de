"""Freeze, cordon and unfreeze a node (spec §7.9 "Markers"), as the writes they need.

Each function returns only the writes that change something, so re-asserting a marker every
pass costs nothing once it holds. The freeze and the cordon marker go in one annotation patch
(atomic), and the cordon follows it, so a crash in between leaves a *marked* node that the next
pass or the startup sweep knows how to undo; undoing uncordons first and drops the markers last
for the same reason.
"""

from __future__ import annotations

from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.actions import Action, AnnotateNode, SetUnschedulable
from fleetgate.domain.rotation.cluster import NodeView


def operator_opted_out(node: NodeView) -> bool:
    """True when the operator (not fleetgate) set ``karpenter.sh/do-not-disrupt: "true"``."""
    return (
        node.annotations.get(ann.KARPENTER_DO_NOT_DISRUPT) == ann.TRUE
        and ann.DO_NOT_DISRUPT_OWNED not in node.annotations
    )


def freeze(node: NodeView, claim: str, *, cordon: bool) -> list[Action]:
    """Mark ``node`` as serving the rotation of ``claim`` (do-not-disrupt), and cordon it if asked.

    An operator's own ``do-not-disrupt: "true"`` is left alone (fleetgate does not take it over,
    so it will not remove it either); any other value is taken over. A node the operator already
    cordoned (unschedulable without our marker) is not marked as cordoned by us.
    """
    patch: dict[str, str | None] = {}
    if node.annotations.get(ann.SURGE_FOR) != claim:
        patch[ann.SURGE_FOR] = claim
    if not operator_opted_out(node):
        if node.annotations.get(ann.KARPENTER_DO_NOT_DISRUPT) != ann.TRUE:
            patch[ann.KARPENTER_DO_NOT_DISRUPT] = ann.TRUE
        if node.annotations.get(ann.DO_NOT_DISRUPT_OWNED) != ann.TRUE:
            patch[ann.DO_NOT_DISRUPT_OWNED] = ann.TRUE
    ours = ann.CORDONED in node.annotations
    want_cordon = cordon and (ours or not node.unschedulable)
    if want_cordon and not ours:
        patch[ann.CORDONED] = ann.TRUE
    actions: list[Action] = []
    if patch:
        actions.append(AnnotateNode(node.name, patch))
    if want_cordon and not node.unschedulable:
        actions.append(SetUnschedulable(node.name, True))
    return actions


def unfreeze(node: NodeView) -> list[Action]:
    """Undo what ``freeze`` did: uncordon only our cordon, drop only our do-not-disrupt."""
    actions: list[Action] = []
    ours_cordon = ann.CORDONED in node.annotations
    if ours_cordon and node.unschedulable:
        actions.append(SetUnschedulable(node.name, False))
    patch: dict[str, str | None] = {}
    for key in (ann.SURGE_FOR, ann.CORDONED):
        if key in node.annotations:
            patch[key] = None
    if ann.DO_NOT_DISRUPT_OWNED in node.annotations:
        patch[ann.DO_NOT_DISRUPT_OWNED] = None
        if ann.KARPENTER_DO_NOT_DISRUPT in node.annotations:
            patch[ann.KARPENTER_DO_NOT_DISRUPT] = None
    if patch:
        actions.append(AnnotateNode(node.name, patch))
    return actions
