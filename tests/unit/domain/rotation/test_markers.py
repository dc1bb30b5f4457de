"""Freeze, cordon and unfreeze markers (spec §7.9)."""

from __future__ import annotations

from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.actions import AnnotateNode, SetUnschedulable
from fleetgate.domain.rotation.cluster import NodeView
from fleetgate.domain.rotation.markers import freeze, operator_opted_out, unfreeze

OURS = {
    ann.SURGE_FOR: "c1",
    ann.KARPENTER_DO_NOT_DISRUPT: "true",
    ann.DO_NOT_DISRUPT_OWNED: "true",
    ann.CORDONED: "true",
}


def test_freezing_a_plain_node_marks_it_ours_and_cordons_it() -> None:
    actions = freeze(NodeView("n"), "c1", cordon=True)
    assert actions == [AnnotateNode("n", OURS), SetUnschedulable("n", True)]


def test_freezing_again_writes_nothing() -> None:
    assert freeze(NodeView("n", annotations=OURS, unschedulable=True), "c1", cordon=True) == []


def test_an_operators_do_not_disrupt_is_left_alone_and_not_taken_over() -> None:
    node = NodeView("n", annotations={ann.KARPENTER_DO_NOT_DISRUPT: "true"})
    assert operator_opted_out(node)
    assert freeze(node, "c1", cordon=False) == [AnnotateNode("n", {ann.SURGE_FOR: "c1"})]
    assert unfreeze(NodeView("n", annotations={**node.annotations, ann.SURGE_FOR: "c1"})) == [
        AnnotateNode("n", {ann.SURGE_FOR: None})
    ]


def test_another_do_not_disrupt_value_is_taken_over() -> None:
    node = NodeView("n", annotations={ann.KARPENTER_DO_NOT_DISRUPT: "false"})
    (patch,) = freeze(node, "c1", cordon=False)
    assert isinstance(patch, AnnotateNode)
    assert patch.patch[ann.KARPENTER_DO_NOT_DISRUPT] == "true"
    assert patch.patch[ann.DO_NOT_DISRUPT_OWNED] == "true"


def test_an_operators_cordon_is_neither_claimed_nor_lifted() -> None:
    node = NodeView("n", unschedulable=True)
    actions = freeze(node, "c1", cordon=True)
    assert all(not isinstance(a, SetUnschedulable) for a in actions)
    (patch,) = actions
    assert isinstance(patch, AnnotateNode) and ann.CORDONED not in patch.patch
    frozen = NodeView("n", unschedulable=True, annotations={ann.SURGE_FOR: "c1"})
    assert all(not isinstance(a, SetUnschedulable) for a in unfreeze(frozen))


def test_unfreezing_uncordons_first_then_drops_every_marker() -> None:
    assert unfreeze(NodeView("n", annotations=OURS, unschedulable=True)) == [
        SetUnschedulable("n", False),
        AnnotateNode("n", {k: None for k in OURS}),
    ]


def test_unfreezing_a_clean_node_writes_nothing() -> None:
    assert unfreeze(NodeView("n")) == []
