"""The reference controller as a neighbour: its markers hold fleetgate back, and are released only
once the operator says the reference is gone."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.actions import (
    AnnotateClaim,
    AnnotateNode,
    AnnotatePool,
    SetUnschedulable,
)
from fleetgate.domain.rotation.census import PoolCensus
from fleetgate.domain.rotation.cluster import NodeView, PoolObservation
from fleetgate.domain.rotation.machine import MachineConfig, step
from fleetgate.domain.rotation.reference import (
    REFERENCE_ACTIVE_ROTATION,
    REFERENCE_CLAIM_STATE,
    REFERENCE_CORDONED,
    REFERENCE_DO_NOT_DISRUPT_OWNED,
    reference_activity,
    release_reference_markers,
)
from tests.unit.domain.rotation.test_machine import LEAD, NOW, POOL_LABEL, E, claim, policy, pool

DUE = E - LEAD + timedelta(minutes=5)  # a claim fleetgate would start rotating now


def _with_node_marks(
    obs: PoolObservation, annotations: dict[str, str], **kw: object
) -> PoolObservation:
    [node] = obs.nodes
    return replace(obs, nodes=(replace(node, annotations=annotations, **kw),))


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: pool(claim("a", DUE), annotations={REFERENCE_ACTIVE_ROTATION: "a"}), "NodePool p"),
        (
            lambda: pool(claim("a", DUE, annotations={REFERENCE_CLAIM_STATE: "draining"})),
            "NodeClaim a",
        ),
        (
            lambda: _with_node_marks(
                pool(claim("a", DUE)),
                {REFERENCE_DO_NOT_DISRUPT_OWNED: "true", ann.KARPENTER_DO_NOT_DISRUPT: "true"},
            ),
            "Node a",
        ),
        (lambda: _with_node_marks(pool(claim("a", DUE)), {REFERENCE_CORDONED: "true"}), "Node a"),
    ],
)
def test_a_reference_marker_is_a_start_gate_naming_where_it_is(make, named) -> None:  # type: ignore[no-untyped-def]
    obs = make()
    assert named in (reference_activity(obs) or "")
    result = step(obs, [policy()], NOW)
    assert result.started is None
    assert result.report.reason == "referenceControllerActive"
    assert not [a for a in result.actions if isinstance(a, AnnotatePool | AnnotateNode)]
    # A census kept across passes knows the markers too: first from the whole pool, then
    # from a pool whose marked member is all that changed.
    first = step(obs, [policy()], NOW, census=PoolCensus())
    assert first == result
    clean = pool(claim("a", DUE))
    second = step(clean, [policy()], NOW, census=first.census)
    assert second.started == "a"
    assert step(obs, [policy()], NOW, census=second.census) == result


def test_a_finished_or_failed_reference_claim_does_not_block() -> None:
    for state in ("failed", "expired"):
        obs = pool(claim("a", DUE, annotations={REFERENCE_CLAIM_STATE: state}))
        assert reference_activity(obs) is None
        assert step(obs, [policy()], NOW).started == "a"


def test_markers_stay_until_the_reference_is_declared_gone_then_only_its_own_are_released() -> None:
    obs = replace(
        pool(
            claim("a", DUE, annotations={REFERENCE_CLAIM_STATE: "pending"}),
            annotations={REFERENCE_ACTIVE_ROTATION: "a", "noderotation.io/last-rotation-at": "x"},
        ),
        nodes=(
            NodeView(
                "a",
                labels=POOL_LABEL,
                annotations={
                    REFERENCE_DO_NOT_DISRUPT_OWNED: "true",
                    ann.KARPENTER_DO_NOT_DISRUPT: "true",
                    REFERENCE_CORDONED: "true",
                },
                unschedulable=True,
                ready=True,
            ),
            # An operator's own opt-out and cordon: no noderotation.io marker, never touched.
            NodeView(
                "ops",
                labels=POOL_LABEL,
                annotations={ann.KARPENTER_DO_NOT_DISRUPT: "true"},
                unschedulable=True,
                ready=True,
            ),
        ),
    )
    assert step(obs, [policy()], NOW).report.reason == "referenceControllerActive"
    released = step(obs, [policy()], NOW, MachineConfig(reference_gone=True))
    assert released.started is None
    writes = [
        a
        for a in released.actions
        if isinstance(a, AnnotateNode | AnnotateClaim | AnnotatePool | SetUnschedulable)
    ]
    assert (
        writes
        == release_reference_markers(obs)
        == [
            SetUnschedulable("a", False),
            AnnotateNode(
                "a",
                {
                    REFERENCE_DO_NOT_DISRUPT_OWNED: None,
                    ann.KARPENTER_DO_NOT_DISRUPT: None,
                    REFERENCE_CORDONED: None,
                },
            ),
            AnnotateClaim("a", {REFERENCE_CLAIM_STATE: None}),
            AnnotatePool("p", {REFERENCE_ACTIVE_ROTATION: None}),  # its history stays readable
        ]
    )
