"""Random faults, crashes and time on the fake cluster: the controller's invariants hold.

A Hypothesis state machine drives one pool: time passes, nodes come and go, Karpenter's
provisioning fails or runs short of capacity, placeholders are preempted, and the controller is
killed after a write and replaced. After every completed stretch of time the pool must be in a
state the spec allows.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from fleetgate.adapters.fakecluster.faults import ControllerCrash
from fleetgate.domain.rotation import annotations as ann
from tests.apps.controller.world import World, policy

ACTIVE = ("pending", "draining")


class RotatingPool(RuleBasedStateMachine):
    """One pool, the real controller, and an adversarial environment."""

    def __init__(self) -> None:
        super().__init__()
        self.world = World(policy(retry_backoff=timedelta(minutes=20)), expire_after="2d")
        for i in range(3):
            self.world.node(timedelta(hours=40 - 3 * i), name=f"n{i}")
        self.workloads = 3

    def _run(self, minutes: int) -> None:
        end = self.world.clock.now() + timedelta(minutes=minutes)
        while True:
            try:
                asyncio.run(self.world.driver.run_until(end))
                return
            except ControllerCrash:
                self.world.restart()

    @rule(minutes=st.integers(1, 240))
    def time_passes(self, minutes: int) -> None:
        self._run(minutes)

    @rule()
    def add_node(self) -> None:
        self.world.node(timedelta(hours=30))
        self.workloads += 1

    @rule(on=st.booleans())
    def provisioning_hangs(self, on: bool) -> None:
        self.world.cluster.fail_provisioning("pool", on)

    @rule(on=st.booleans())
    def capacity_runs_out(self, on: bool) -> None:
        self.world.cluster.capacity_shortage("pool", on)

    @rule()
    def placeholders_are_preempted(self) -> None:
        self.world.cluster.preempt_placeholders()

    @rule(writes=st.integers(1, 6))
    def controller_will_crash(self, writes: int) -> None:
        self.world.cluster.crash_after(writes)

    @invariant()
    def at_most_one_rotation_and_it_is_the_anchored_one(self) -> None:
        anchor = self.world.pool_annotations().get(ann.ACTIVE_ROTATION)
        active = [
            c.name
            for c in self.world.cluster.claims.values()
            if c.annotations.get(ann.CLAIM_STATE) in ACTIVE and c.deleting_at is None
        ]
        assert set(active) <= {anchor}, (anchor, active)

    @invariant()
    def our_marks_exist_only_for_the_anchored_rotation(self) -> None:
        anchor = self.world.pool_annotations().get(ann.ACTIVE_ROTATION)
        for claim in self.world.cluster.claims.values():
            node = claim.node
            if node is not None and ann.SURGE_FOR in node.annotations:
                assert node.annotations[ann.SURGE_FOR] == anchor, node
            if node is not None and ann.CORDONED in node.annotations:
                assert anchor is not None, node
        for pod in self.world.cluster.pods.values():
            if pod.priority < 0:
                assert pod.labels.get(ann.SURGE_FOR) == anchor, pod

    @invariant()
    def no_workload_is_ever_lost(self) -> None:
        apps = [p for p in self.world.cluster.pods.values() if p.name.endswith("-app")]
        assert len(apps) == self.workloads


TestRotatingPool = RotatingPool.TestCase
TestRotatingPool.settings = settings(max_examples=15, stateful_step_count=12, deadline=None)
