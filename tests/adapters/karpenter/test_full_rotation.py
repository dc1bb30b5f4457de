"""Done-when: the real controller runs a FULL rotation through the Karpenter gateway.

The controller shell and the pure machine are the production ones; the cluster is the local API
server, with Karpenter's reactions played between passes: it provisions a node for the pending
placeholder and finishes the drain of a deleted NodeClaim. Time is virtual, shared by the
controller and the server's timestamps.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from datetime import timedelta

from prometheus_client import CollectorRegistry

from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.karpenter.gateway import KarpenterGateway
from fleetgate.apps.controller.metrics import RotationMetrics
from fleetgate.apps.controller.shell import PassResult, RotationController
from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.constants import LONG_REQUEUE
from fleetgate.domain.rotation.labelselector import LabelSelector
from fleetgate.domain.rotation.machine import MachineConfig
from fleetgate.domain.rotation.policy import RotationPolicy
from fleetgate.domain.rotation.windows import MaintenanceWindow
from tests.adapters.karpenter.conftest import NAMESPACE
from tests.adapters.karpenter.karpenter_sim import KarpenterSim, nodepool
from tests.adapters.karpenter.kubeapi import KubeAPIServer

ALWAYS = MaintenanceWindow(
    "UTC", ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"), "00:00", "24:00"
)
POLICY = RotationPolicy(
    name="all", node_pool_selector=LabelSelector(), maintenance_windows=(ALWAYS,)
)


def _controller(
    gateway: KarpenterGateway,
    clock: VirtualClock,
    passes: list[PassResult],
    registry: CollectorRegistry,
) -> RotationController:
    async def policies() -> list[RotationPolicy]:
        return [POLICY]

    return RotationController(
        gateway,
        policies,
        clock,
        gateway.event_sink(),
        RotationMetrics(registry),
        MachineConfig(namespace=NAMESPACE),
        on_pass=passes.append,
    )


async def _run(
    controller: RotationController,
    sim: KarpenterSim,
    clock: VirtualClock,
    done: Callable[[], bool],
    rounds: int = 60,
) -> None:
    """Passes when due; between them time moves on and Karpenter reacts."""
    for _ in range(rounds):
        await controller.run_due()
        if done():
            return
        due = controller.next_due()
        assert due is not None
        clock.set(due)
        sim.provision()
        sim.terminate()
    raise AssertionError("the rotation did not finish")


async def test_a_full_surge_rotation_through_the_karpenter_gateway(
    api: KubeAPIServer, sim: KarpenterSim, gateway: KarpenterGateway, clock: VirtualClock
) -> None:
    api.seed(nodepool("pool", expire_after="336h", tgp="1h"))
    now = clock.now()
    old, old_node = sim.node("pool", created=now - timedelta(days=14) + timedelta(minutes=30))
    young, _ = sim.node("pool", created=now - timedelta(days=1))
    sim.pod("web-0", old_node, {"cpu": "3", "memory": "1Gi"})
    passes: list[PassResult] = []
    registry = CollectorRegistry()
    controller = _controller(gateway, clock, passes, registry)
    anchor_uid = (api.get("NodeClaim", old) or {})["metadata"]["uid"]

    await _run(
        controller,
        sim,
        clock,
        lambda: api.get("NodeClaim", old) is None and ann.LAST_ROTATION_AT in _annotations(api),
    )

    # The old claim and its node are gone; a new Ready node of the pool replaced it.
    claims = {c["metadata"]["name"] for c in api.list("NodeClaim")}
    assert old not in claims and young in claims and len(claims) == 2
    assert api.get("Node", old_node) is None
    pool = _annotations(api)
    assert ann.ACTIVE_ROTATION not in pool and ann.ACTIVE_ROTATION_STATE not in pool
    assert pool[ann.LAST_ROTATION_AT]
    assert api.list("Pod", NAMESPACE) == []  # the placeholder was removed
    for node in api.list("Node"):  # nothing is left frozen or cordoned
        assert ann.SURGE_FOR not in (node["metadata"].get("annotations") or {})
        assert not node["spec"].get("unschedulable")
    assert (
        registry.get_sample_value(
            "fleetgate_rotation_completed_total", {"nodepool": "pool", "outcome": "success"}
        )
        == 1.0
    )

    # What went over the wire: the anchor carried the version, the placeholder was the spec's
    # Pod, and the drain started by deleting the old NodeClaim (never by evicting or creating).
    writes = api.writes()
    anchor = next(
        w
        for w in writes
        if w.path == "/apis/karpenter.sh/v1/nodepools/pool"
        and ann.ACTIVE_ROTATION in w.body["metadata"]["annotations"]
        and w.body["metadata"]["annotations"][ann.ACTIVE_ROTATION] == old
    )
    assert anchor.method == "PATCH" and anchor.body["metadata"]["resourceVersion"]
    [placeholder] = [w for w in writes if w.method == "POST" and w.path.endswith("/pods")]
    assert placeholder.body["spec"]["preemptionPolicy"] == "Never"
    assert placeholder.body["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "3"
    deletes = {(w.method, w.path) for w in writes if w.method == "DELETE"}
    assert ("DELETE", f"/apis/karpenter.sh/v1/nodeclaims/{old}") in deletes
    assert all("nodeclaims" not in w.path for w in writes if w.method == "POST")
    assert all("/eviction" not in w.path for w in writes)
    assert writes.index(placeholder) < min(
        i
        for i, w in enumerate(writes)
        if (w.method, w.path) == ("DELETE", f"/apis/karpenter.sh/v1/nodeclaims/{old}")
    )  # make before break
    events = {e["reason"]: e for e in api.list("Event", "default")}
    # As node-rotation-controller records them: the start relates the claim it rotates.
    assert events["RotationStarted"]["action"] == events["RotationCompleted"]["action"]
    assert events["RotationStarted"]["action"] == "RotateNode"
    assert events["RotationStarted"]["related"] == {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "name": old,
        # Looked up while the claim still existed, so kubectl can match it.
        "uid": anchor_uid,
    }
    assert "related" not in events["RotationCompleted"]


async def test_a_lost_anchor_race_requeues_and_writes_nothing_else(
    api: KubeAPIServer, sim: KarpenterSim, gateway: KarpenterGateway, clock: VirtualClock
) -> None:
    api.seed(nodepool("pool", expire_after="336h", tgp="1h"))
    old, node = sim.node("pool", created=clock.now() - timedelta(days=14) + timedelta(minutes=30))
    sim.pod("web-0", node, {"cpu": "1"})
    passes: list[PassResult] = []
    controller = _controller(gateway, clock, passes, CollectorRegistry())
    await controller.startup_sweep()
    api.requests.clear()
    api.fail_next("PATCH", r"/nodepools/pool$", 409)  # another writer got in first

    result = await controller.reconcile("pool")

    assert result.interrupted is not None and "409" in result.interrupted
    assert result.requeue_at == clock.now() + timedelta(minutes=1)
    [write] = api.writes()  # the anchor attempt, and nothing after it
    assert write.method == "PATCH" and write.body["metadata"]["resourceVersion"]
    assert ann.ACTIVE_ROTATION not in _annotations(api)
    assert (api.get("NodeClaim", old) or {})["metadata"].get("annotations") in (None, {})

    # Next time round the anchor goes through and the rotation starts.
    clock.set(result.requeue_at)
    await controller.run_due()
    assert _annotations(api)[ann.ACTIVE_ROTATION] == old


def _annotations(api: KubeAPIServer) -> dict[str, str]:
    pool = api.get("NodePool", "pool")
    assert pool is not None
    return dict(pool["metadata"].get("annotations") or {})


async def test_a_surge_karpenter_cannot_place_rolls_back_and_says_why(
    api: KubeAPIServer, sim: KarpenterSim, gateway: KarpenterGateway, clock: VirtualClock
) -> None:
    api.seed(nodepool("pool", expire_after="336h", tgp="1h"))
    old, node = sim.node("pool", created=clock.now() - timedelta(days=14) + timedelta(minutes=30))
    sim.pod("web-0", node, {"cpu": "3"})
    sim.shortage = True  # no capacity of this pool's kind anywhere: placeholders stay Pending
    controller = _controller(gateway, clock, [], CollectorRegistry())

    def failed() -> bool:
        claim = api.get("NodeClaim", old) or {}
        return (claim.get("metadata", {}).get("annotations") or {}).get(ann.CLAIM_STATE) == "failed"

    await _run(controller, sim, clock, failed)

    assert api.get("NodeClaim", old) is not None  # never broken: the old node stays
    assert api.list("Pod", NAMESPACE) == []  # the placeholder was reaped
    node_obj = api.get("Node", node)
    assert node_obj is not None and not node_obj["spec"].get("unschedulable")  # uncordoned
    pool = _annotations(api)
    assert ann.ACTIVE_ROTATION not in pool and pool[ann.LAST_FAILURE_AT]
    events = {e["reason"]: e for e in api.list("Event", "default")}
    unschedulable = events["SurgeUnschedulable"]
    assert unschedulable["type"] == "Warning"
    assert unschedulable["regarding"]["kind"] == "NodeClaim"
    assert unschedulable["regarding"]["name"] == old
    assert "didn't match Pod's node affinity" in unschedulable["note"]  # the scheduler's words
    assert events["RotationFailed"]["regarding"] == {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "name": old,
        "uid": (api.get("NodeClaim", old) or {})["metadata"]["uid"],
    }
    # As node-rotation-controller records them: the failure relates the pool, the
    # unschedulable surge relates nothing.
    assert events["RotationFailed"]["action"] == "RotateNode"
    assert events["RotationFailed"]["related"] == {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "name": "pool",
        "uid": (api.get("NodePool", "pool") or {})["metadata"]["uid"],
    }
    assert unschedulable["action"] == "ProvisionSurge" and "related" not in unschedulable


async def test_a_loaded_fleet_rotates_beside_karpenter_without_a_double_replacement(
    api: KubeAPIServer, sim: KarpenterSim, gateway: KarpenterGateway, clock: VirtualClock
) -> None:
    # Done-when of issue 16: Karpenter writes the NodePool's status in the background (so the
    # anchor write meets real 409s), Pods are evicted gracefully (terminating for their grace
    # period), and Karpenter disrupts the oldest node itself while fleetgate rotates the rest.
    api.seed(nodepool("pool", expire_after="336h", tgp="1h"))
    sim.graceful = True
    now = clock.now()
    due = now - timedelta(days=14) + timedelta(minutes=30)
    karpenters, _ = sim.node("pool", created=due - timedelta(minutes=10))  # the oldest
    ours = [sim.node("pool", created=due + timedelta(minutes=i)) for i in range(3)]
    guarded, guarded_node = sim.node("pool", created=due)
    young = [sim.node("pool", created=now - timedelta(days=1))[0] for _ in range(2)]
    for i, (_, node) in enumerate(ours):
        sim.pod(f"web-{i}", node, {"cpu": "1", "memory": "1Gi"})
        sim.pod(f"api-{i}", node, {"cpu": "500m"})
    sim.pod(
        "batch-0", guarded_node, {"cpu": "1"}, annotations={"karpenter.sh/do-not-disrupt": "true"}
    )
    replacement = sim.disrupt(karpenters)  # Karpenter's own replacement, under way
    sim.recount_after_reads("pool", nth=2)  # a status write lands between read and anchor
    writer = asyncio.create_task(sim.count_forever("pool", every=0.5))
    controller = _controller(gateway, clock, [], CollectorRegistry())
    ours_claims = [c for c, _ in ours]
    disrupted_done = False

    def done() -> bool:
        nonlocal disrupted_done
        if not disrupted_done:  # Karpenter's replacement is up: it deletes the disrupted claim
            sim.finish_disruption(karpenters)
            disrupted_done = True
        pool = _annotations(api)
        return (
            all(api.get("NodeClaim", c) is None for c in ours_claims)
            and ann.ACTIVE_ROTATION not in pool
            and ann.LAST_ROTATION_AT in pool
        )

    try:
        await _run(controller, sim, clock, done, rounds=200)
    finally:
        writer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await writer

    assert api.conflicts >= 1  # the anchor write met a real 409 from the status writer
    claims = {c["metadata"]["name"] for c in api.list("NodeClaim")}
    assert karpenters not in claims and replacement in claims
    assert guarded in claims and set(young) <= claims  # opted out by its Pod; not yet due
    # One new claim per rotated claim, plus Karpenter's one: nothing was replaced twice.
    assert len(claims) == 1 + 2 + len(ours) + 1
    writes = api.writes()
    touched = [w for w in writes if karpenters in w.path or karpenters in json.dumps(w.body)]
    assert touched == []  # fleetgate never annotated, cordoned, surged for or deleted it
    assert not [w for w in writes if guarded in w.path]
    surges = [w for w in writes if w.method == "POST" and w.path.endswith("/pods")]
    surged_for = [w.body["metadata"]["labels"][ann.SURGE_FOR] for w in surges]
    assert sorted(surged_for) == sorted(ours_claims)  # exactly one surge per rotated claim
    assert api.list("Pod", NAMESPACE) == []


async def test_a_drain_a_pdb_holds_runs_to_the_tgp_then_completes_make_before_break(
    api: KubeAPIServer, sim: KarpenterSim, gateway: KarpenterGateway, clock: VirtualClock
) -> None:
    # The workload's budget allows no disruption: every eviction of its Pod is a 429, so
    # Karpenter deletes it only once the old claim's terminationGracePeriod (1h) has passed.
    api.seed(nodepool("pool", expire_after="336h", tgp="1h"))
    now = clock.now()
    old, old_node = sim.node("pool", created=now - timedelta(days=14) + timedelta(minutes=30))
    young, _ = sim.node("pool", created=now - timedelta(days=1))
    sim.pod("web-0", old_node, {"cpu": "3", "memory": "1Gi"}, labels={"app": "web"})
    api.seed(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "apps"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "web"}}},
        }
    )
    passes: list[PassResult] = []
    registry = CollectorRegistry()
    controller = _controller(gateway, clock, passes, registry)
    seen: dict[str, object] = {}

    def done() -> bool:
        # What held at each round, first seen: the surge node Ready, the old claim deleting.
        claims = api.list("NodeClaim")
        surge_ready = any(
            c["metadata"]["name"] not in (old, young)
            and any(
                x["type"] == "Ready" and x["status"] == "True" for x in c["status"]["conditions"]
            )
            for c in claims
        )
        if surge_ready:
            seen.setdefault("surge ready", clock.now())
        deleting = api.get("NodeClaim", old)
        if deleting is not None and deleting["metadata"].get("deletionTimestamp"):
            seen.setdefault("deleting", clock.now())
        if deleting is None:
            seen.setdefault("gone", clock.now())
        return deleting is None and ann.LAST_ROTATION_AT in _annotations(api)

    await _run(controller, sim, clock, done, rounds=500)

    assert sim.forced == [old]
    assert ("web-0", 429) in sim.evictions and ("web-0", 201) not in sim.evictions
    budget = api.get("PodDisruptionBudget", "web", "apps")
    assert budget is not None and budget["status"]["disruptionsAllowed"] == 0
    # Make before break: the old claim was deleted only once the surge node was Ready, and it
    # went no sooner than its terminationGracePeriod after its deletion.
    assert seen["surge ready"] <= seen["deleting"]  # type: ignore[operator]
    assert seen["gone"] >= seen["deleting"] + timedelta(hours=1)  # type: ignore[operator]
    assert (
        registry.get_sample_value(
            "fleetgate_rotation_completed_total", {"nodepool": "pool", "outcome": "success"}
        )
        == 1.0
    )


async def test_a_surge_clamped_beside_daemonsets_is_reported_as_nrc_reports_it(
    api: KubeAPIServer, sim: KarpenterSim, gateway: KarpenterGateway, clock: VirtualClock
) -> None:
    # On "pool" a DaemonSet leaves less than the workload asks for: the placeholder is clamped
    # (and by more than the node/claim band); on "tight" it leaves nothing: the clamp is refused.
    due = clock.now() - timedelta(days=14) + timedelta(minutes=30)
    for pool, daemons in (("pool", "1"), ("tight", "4")):
        api.seed(nodepool(pool, expire_after="336h", tgp="1h"))
        _, node = sim.node(pool, created=due)
        sim.pod(f"web-{pool}", node, {"cpu": "3"})
        sim.pod(f"agent-{pool}", node, {"cpu": daemons}, namespace="kube-system", daemonset=True)
    controller = _controller(gateway, clock, [], CollectorRegistry())

    await controller.run_due()

    events = {(e["reason"], e["regarding"]["name"]): e for e in api.list("Event", "default")}
    shapes = {
        reason: (e["type"], e["action"], e["regarding"]["kind"], e["related"]["kind"])
        for (reason, _), e in events.items()
        if reason.startswith("SurgeClamp")
    }
    assert shapes == {
        "SurgeClamped": ("Normal", "ProvisionSurge", "NodeClaim", "NodePool"),
        "SurgeClampBandExceeded": ("Warning", "ProvisionSurge", "NodeClaim", "NodePool"),
        "SurgeClampRefused": ("Warning", "ProvisionSurge", "NodeClaim", "NodePool"),
    }
    refused = next(e for (r, _), e in events.items() if r == "SurgeClampRefused")
    assert refused["related"]["name"] == "tight"  # the claim's own pool, with its uid
    assert refused["related"]["uid"] == (api.get("NodePool", "tight") or {})["metadata"]["uid"]


async def test_a_drifted_claim_karpenter_never_replaces_is_rotated_once_it_is_due(
    api: KubeAPIServer, sim: KarpenterSim, gateway: KarpenterGateway, clock: VirtualClock
) -> None:
    # Karpenter marks the claim Drifted but never acts on it (as under a Drifted budget of "0").
    api.seed(nodepool("pool", expire_after="336h", tgp="1h"))
    old, old_node = sim.node("pool", created=clock.now() - timedelta(days=14) + timedelta(hours=1))
    api.modify(
        "NodeClaim",
        old,
        lambda c: c["status"]["conditions"].append(
            {"type": "Drifted", "status": "True", "reason": "NodeClassDrift", "message": ""}
        ),
    )
    sim.pod("web-0", old_node, {"cpu": "1"})
    passes: list[PassResult] = []
    controller = _controller(gateway, clock, passes, CollectorRegistry())

    await _run(
        controller,
        sim,
        clock,
        lambda: api.get("NodeClaim", old) is None and ann.LAST_ROTATION_AT in _annotations(api),
    )

    started = [p.step for p in passes if p.step is not None and p.step.started == old]
    assert [s.drift_rule.value for s in started if s.drift_rule] == ["driftedDue"]
    census = started[0].report.census
    assert census is not None and census.as_dict()["DriftedDue"] == 1
    events = {e["reason"]: e for e in api.list("Event", "default")}
    assert "rule driftedDue" in events["RotationStarted"]["note"]
    assert "RotationCompleted" in events


async def test_no_rotation_starts_while_the_nodepools_budgets_allow_no_disruption(
    api: KubeAPIServer, sim: KarpenterSim, gateway: KarpenterGateway, clock: VirtualClock
) -> None:
    pool = nodepool("pool", expire_after="336h", tgp="1h")
    pool["spec"]["disruption"]["budgets"] = [{"nodes": "0"}]
    api.seed(pool)
    old, node = sim.node("pool", created=clock.now() - timedelta(days=14) + timedelta(hours=1))
    sim.pod("web-0", node, {"cpu": "1"})
    passes: list[PassResult] = []
    controller = _controller(gateway, clock, passes, CollectorRegistry())

    await controller.run_due()

    step = passes[-1].step
    assert step is not None and step.started is None
    assert step.report.reason == "disruptionBudget"
    assert ann.ACTIVE_ROTATION not in _annotations(api)  # no anchor: nothing started

    # The operator lifts the budget: the next pass starts the rotation.
    api.modify("NodePool", "pool", lambda p: p["spec"]["disruption"].update(budgets=[]))
    clock.set(controller.next_due() or clock.now())
    await controller.run_due()
    assert _annotations(api)[ann.ACTIVE_ROTATION] == old


async def test_a_pool_that_cannot_be_read_is_held_with_a_warning_and_the_others_served(
    api: KubeAPIServer, sim: KarpenterSim, gateway: KarpenterGateway, clock: VirtualClock
) -> None:
    # "broken" holds a value Karpenter could not have written; "pool" is due for rotation.
    api.seed(nodepool("broken", expire_after="336h", tgp="soon"))
    sim.node("broken", created=clock.now() - timedelta(days=14) + timedelta(minutes=30))
    api.seed(nodepool("pool", expire_after="336h", tgp="1h"))
    old, node = sim.node("pool", created=clock.now() - timedelta(days=14) + timedelta(minutes=30))
    sim.pod("web-0", node, {"cpu": "1"})
    passes: list[PassResult] = []
    controller = _controller(gateway, clock, passes, CollectorRegistry())

    results = await controller.run_due()  # never raises: one pool's problem stays its own

    held = next(r for r in results if r.pool == "broken")
    assert held.step is None and held.interrupted is not None
    assert "spec.template.spec.terminationGracePeriod" in held.interrupted
    assert held.requeue_at == clock.now() + LONG_REQUEUE
    assert _annotations(api)[ann.ACTIVE_ROTATION] == old  # the other pool was served
    broken = api.get("NodePool", "broken") or {}
    assert ann.ACTIVE_ROTATION not in (broken["metadata"].get("annotations") or {})
    [warning] = [e for e in api.list("Event", "default") if e["reason"] == "NodePoolUnreadable"]
    assert warning["type"] == "Warning" and warning["regarding"]["name"] == "broken"
    assert "spec.template.spec.terminationGracePeriod" in warning["note"]

    # Said once per distinct problem, not on every pass.
    clock.set(held.requeue_at)
    await controller.reconcile("broken")
    assert (
        len([e for e in api.list("Event", "default") if e["reason"] == "NodePoolUnreadable"]) == 1
    )
