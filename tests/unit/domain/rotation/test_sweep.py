"""The startup sweep (spec §7.9)."""

from __future__ import annotations

from datetime import UTC, datetime

from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.actions import (
    AnnotateClaim,
    AnnotateNode,
    AnnotatePool,
    CountCompletion,
    DeletePlaceholder,
    SetUnschedulable,
)
from fleetgate.domain.rotation.cluster import NodeClaimView, NodeView, PodView, PoolObservation
from fleetgate.domain.rotation.sweep import sweep

NOW = datetime(2024, 1, 3, tzinfo=UTC)


def pool(anchor: str | None, **extra: str) -> PoolObservation:
    annotations = dict(extra)
    if anchor:
        annotations[ann.ACTIVE_ROTATION] = anchor
    return PoolObservation(
        name="p",
        version="1",
        expire_after=None,
        annotations=annotations,
        claims=(
            NodeClaimView("a", NOW, None, annotations={ann.CLAIM_STATE: "pending"}),
            NodeClaimView(
                "b",
                NOW,
                None,
                annotations={
                    ann.CLAIM_STATE: "draining",
                    ann.STARTED_AT: "x",
                    ann.SURGE_CLAIM: "s",
                },
            ),
            NodeClaimView("c", NOW, None, annotations={ann.CLAIM_STATE: "failed"}),
        ),
        nodes=(
            NodeView(
                "a", annotations={ann.SURGE_FOR: "a", ann.CORDONED: "true"}, unschedulable=True
            ),
            NodeView("b", annotations={ann.SURGE_FOR: "b"}),
            NodeView("x", annotations={ann.CORDONED: "true"}, unschedulable=True),
            NodeView("op", unschedulable=True),
        ),
        placeholders=(
            PodView("ns", "ph-a", labels={ann.SURGE_FOR: "a"}),
            PodView("ns", "ph-b", labels={ann.SURGE_FOR: "b"}),
        ),
    )


def test_an_anchored_rotation_is_left_alone_and_orphans_are_cleaned() -> None:
    actions = sweep(pool("a"), NOW)
    assert DeletePlaceholder("ns", "ph-b") in actions
    assert DeletePlaceholder("ns", "ph-a") not in actions
    assert AnnotateNode("b", {ann.SURGE_FOR: None}) in actions
    assert SetUnschedulable("x", False) in actions  # cordon-only orphan
    assert not any(
        getattr(a, "node", getattr(a, "name", None)) in ("a", "op")
        for a in actions
        if isinstance(a, (AnnotateNode, SetUnschedulable))
    )
    failed = [a for a in actions if isinstance(a, AnnotateClaim)]
    assert [a.name for a in failed] == ["b"]
    assert failed[0].patch == {
        ann.CLAIM_STATE: "failed",
        ann.FAILED_AT: "2024-01-03T00:00:00Z",
        ann.STARTED_AT: None,
        ann.SURGE_CLAIM: None,
    }
    assert actions.count(CountCompletion("failure")) == 1
    assert not any(isinstance(a, AnnotatePool) for a in actions)


def test_without_an_anchor_the_mirror_goes_and_every_rotation_is_failed() -> None:
    actions = sweep(
        pool(None, **{ann.ACTIVE_ROTATION_STATE: "draining", ann.DRAINING_AT: "t"}), NOW
    )
    assert actions[0] == AnnotatePool("p", {ann.ACTIVE_ROTATION_STATE: None, ann.DRAINING_AT: None})
    assert [a.name for a in actions if isinstance(a, AnnotateClaim)] == ["a", "b"]
    assert {a.name for a in actions if isinstance(a, DeletePlaceholder)} == {"ph-a", "ph-b"}


def test_a_clean_pool_needs_nothing() -> None:
    clean = PoolObservation(
        name="p",
        version="1",
        expire_after=None,
        claims=(NodeClaimView("c", NOW, None),),
        nodes=(NodeView("c"),),
    )
    assert sweep(clean, NOW) == []
