"""The reference controller's markers on a real (local) API server: fleetgate holds the pool back
while they are there, and once the reference is declared gone it removes exactly what that
controller owned, then rotates the pool itself."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from prometheus_client import CollectorRegistry

from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.karpenter.gateway import KarpenterGateway
from fleetgate.apps.controller.shell import PassResult, RotationController
from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.reference import (
    REFERENCE_CORDONED,
    REFERENCE_DO_NOT_DISRUPT_OWNED,
)
from tests.adapters.karpenter.conftest import NAMESPACE
from tests.adapters.karpenter.karpenter_sim import KarpenterSim, nodepool
from tests.adapters.karpenter.kubeapi import KubeAPIServer
from tests.adapters.karpenter.test_full_rotation import _controller as full_rotation_controller
from tests.adapters.karpenter.test_full_rotation import _run


def _controller(
    gateway: KarpenterGateway, clock: VirtualClock, passes: list[PassResult], gone: bool
) -> RotationController:
    """The full-rotation test's controller, told whether the reference controller is gone."""
    controller = full_rotation_controller(gateway, clock, passes, CollectorRegistry())
    controller.config = replace(controller.config, reference_gone=gone)
    return controller


def _left_by_the_reference(node: dict[str, Any]) -> None:
    node["metadata"].setdefault("annotations", {}).update(
        {
            ann.KARPENTER_DO_NOT_DISRUPT: "true",
            REFERENCE_DO_NOT_DISRUPT_OWNED: "true",
            REFERENCE_CORDONED: "true",
        }
    )
    node["spec"]["unschedulable"] = True


def _operators_own(node: dict[str, Any]) -> None:
    node["metadata"].setdefault("annotations", {})[ann.KARPENTER_DO_NOT_DISRUPT] = "true"


async def test_reference_markers_hold_the_pool_until_released_then_fleetgate_rotates(
    api: KubeAPIServer, sim: KarpenterSim, gateway: KarpenterGateway, clock: VirtualClock
) -> None:
    api.seed(nodepool("pool", expire_after="336h", tgp="1h"))
    old, old_node = sim.node(
        "pool", created=clock.now() - timedelta(days=14) + timedelta(minutes=30)
    )
    _, opted_out = sim.node("pool", created=clock.now() - timedelta(days=1))
    api.modify("Node", old_node, _left_by_the_reference)
    api.modify("Node", opted_out, _operators_own)
    passes: list[PassResult] = []

    held = _controller(gateway, clock, passes, gone=False)
    for _ in range(3):
        await held.run_once()
        clock.advance(timedelta(minutes=1))
    assert {p.step.report.reason for p in passes if p.step} == {"referenceControllerActive"}
    assert ann.ACTIVE_ROTATION not in (api.get("NodePool", "pool") or {})["metadata"].get(
        "annotations", {}
    )
    assert api.list("Pod", NAMESPACE) == []  # no placeholder: nothing started

    released = _controller(gateway, clock, passes, gone=True)
    await _run(released, sim, clock, lambda: api.get("NodeClaim", old) is None)  # then rotated
    # The reference's writes to the node were undone one by one before the rotation began...
    writes = [w for w in api.writes() if w.path == f"/api/v1/nodes/{old_node}"]
    assert [w.body for w in writes[:2]] == [
        {"spec": {"unschedulable": None}},  # uncordoned (the field removed)
        {
            "metadata": {
                "annotations": {
                    REFERENCE_DO_NOT_DISRUPT_OWNED: None,
                    ann.KARPENTER_DO_NOT_DISRUPT: None,
                    REFERENCE_CORDONED: None,
                }
            }
        },
    ]
    # ...and the operator's own opt-out on another node was never touched.
    kept = api.get("Node", opted_out) or {}
    assert kept["metadata"]["annotations"][ann.KARPENTER_DO_NOT_DISRUPT] == "true"
    assert not [w for w in api.writes() if w.path == f"/api/v1/nodes/{opted_out}"]
