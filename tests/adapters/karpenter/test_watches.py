"""Watches: the controller is woken on exactly what a pass waits for, not on its own writes."""

from __future__ import annotations

import asyncio

import pytest

from fleetgate.adapters.karpenter.gateway import KarpenterGateway
from fleetgate.adapters.karpenter.watches import (
    EdgeFilter,
    node_signature,
    nodeclaim_signature,
    nodepool_signature,
    placeholder_signature,
)
from fleetgate.domain.rotation.cluster import PlaceholderSpec, Requirement
from fleetgate.domain.rotation.disruption import DISRUPTED_TAINT
from tests.adapters.karpenter.conftest import NAMESPACE
from tests.adapters.karpenter.karpenter_sim import KarpenterSim, nodepool
from tests.adapters.karpenter.kubeapi import DEFAULT_RESOURCES, KubeAPIServer, Obj
from tests.adapters.karpenter.kubeapi_store import chart_crd
from tests.waiting import until


def _claim(**status: object) -> Obj:
    return {
        "metadata": {"name": "c", "labels": {"karpenter.sh/nodepool": "p"}},
        "status": dict(status),
    }


def test_edges_fire_on_a_signature_change_and_on_deletion_only() -> None:
    edges = EdgeFilter(
        nodeclaim_signature, lambda o: o["metadata"]["labels"]["karpenter.sh/nodepool"]
    )
    assert edges.changed("ADDED", _claim()) == (True, "p")
    assert edges.changed("MODIFIED", _claim()) == (False, None)  # e.g. our own annotation write
    ready = _claim(conditions=[{"type": "Ready", "status": "True"}], nodeName="n")
    assert edges.changed("MODIFIED", ready) == (True, "p")
    deleting = {
        **ready,
        "metadata": {**ready["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"},
    }
    assert edges.changed("MODIFIED", deleting) == (True, "p")
    assert edges.changed("DELETED", deleting) == (True, "p")
    assert edges.changed("BOOKMARK", deleting) == (False, None)


def test_a_placeholder_wakes_when_scheduled_running_or_unschedulable() -> None:
    edges = EdgeFilter(placeholder_signature, lambda o: "p")
    pending: Obj = {"metadata": {"name": "x", "namespace": "ns"}, "spec": {}, "status": {}}
    assert edges.changed("ADDED", pending)[0]
    stuck = {
        **pending,
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]},
    }
    assert edges.changed("MODIFIED", stuck)[0]
    running = {**pending, "spec": {"nodeName": "n"}, "status": {"phase": "Running"}}
    assert edges.changed("MODIFIED", running)[0]
    assert not edges.changed("MODIFIED", running)[0]


async def test_the_watches_wake_the_controller_on_karpenters_progress(
    api: KubeAPIServer, sim: KarpenterSim, gateway: KarpenterGateway
) -> None:
    api.seed(nodepool("pool"))
    claim, node = sim.node("pool")
    seen: list[str | None] = []
    task = asyncio.create_task(gateway.watch(seen.append))
    await until(lambda: seen.count("pool") >= 3)  # the initial state: pool, claim, node
    seen.clear()

    # Our own annotation writes change nothing a pass waits for: no wake-up.
    await gateway.annotate_pool("pool", {"fleetgate.io/active-rotation": claim})
    await gateway.annotate_claim(claim, {"fleetgate.io/state": "pending"})
    await gateway.annotate_node(node, {"fleetgate.io/surge-for": claim})
    await asyncio.sleep(0.2)
    assert seen == []

    # A surge node comes up: a new claim, its node Ready, the placeholder bound and running.
    await gateway.create_placeholder(
        PlaceholderSpec(
            namespace=NAMESPACE,
            name="fleetgate-surge-x",
            pool="pool",
            surge_for=claim,
            required=(Requirement("karpenter.sh/nodepool", "In", ("pool",)),),
            labels={"karpenter.sh/nodepool": "pool", "fleetgate.io/surge-for": claim},
        )
    )
    await until(lambda: seen == ["pool"])
    seen.clear()
    sim.provision()
    await until(lambda: len(seen) >= 3)
    await asyncio.sleep(0.1)
    assert seen == ["pool"] * 3  # the new claim, its Ready node, the placeholder running
    seen.clear()

    await gateway.delete_claim(claim)  # the drain starts, then Karpenter finishes it
    await until(lambda: seen == ["pool"])
    sim.terminate()
    await until(lambda: len(seen) >= 3)
    await asyncio.sleep(0.1)
    assert seen == ["pool"] * 3  # the old claim and node gone (its pod was no placeholder)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_policy_change_wakes_every_pool(
    api: KubeAPIServer, gateway: KarpenterGateway
) -> None:
    api.resources = (
        *DEFAULT_RESOURCES,
        chart_crd("rotationpolicies.fleetgate.io"),
    )
    seen: list[str | None] = []
    task = asyncio.create_task(gateway.watch(seen.append))
    await asyncio.sleep(0.2)
    api.seed(
        {
            "apiVersion": "fleetgate.io/v1alpha1",
            "kind": "RotationPolicy",
            "metadata": {"name": "p", "generation": 1},
            "spec": {
                "nodePoolSelector": {},
                "maintenanceWindows": [
                    {"timezone": "UTC", "days": ["Sat"], "start": "01:00", "end": "05:00"}
                ],
            },
        }
    )
    await until(lambda: seen == [None])
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_failed_stream_is_reopened(
    api: KubeAPIServer, clock: object, kubeconfig: str
) -> None:
    api.seed(nodepool("pool"))
    api.fail_next("GET", r"/nodepools$", 500)  # the first watch of nodepools fails
    async with KarpenterGateway(clock, kubeconfig=kubeconfig) as gw:
        from fleetgate.adapters.karpenter.watches import ChangeWatcher

        seen: list[str | None] = []
        watcher = ChangeWatcher(gw.api_client, NAMESPACE, seen.append, retry_seconds=0.05)
        task = asyncio.create_task(watcher.run())
        await until(lambda: "pool" in seen)  # the retry saw the pool
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def test_karpenters_own_marks_and_a_pools_readiness_wake_the_controller() -> None:
    claims = EdgeFilter(nodeclaim_signature, lambda o: "p")
    assert claims.changed("ADDED", _claim())[0]
    marked = _claim(conditions=[{"type": "DisruptionReason", "status": "True"}])
    assert claims.changed("MODIFIED", marked)[0]
    drifted = _claim(
        conditions=[
            {"type": "DisruptionReason", "status": "True"},
            {"type": "Drifted", "status": "True"},
        ]
    )
    assert claims.changed("MODIFIED", drifted)[0]

    nodes = EdgeFilter(node_signature, lambda o: "p")
    node: Obj = {"metadata": {"name": "n"}, "spec": {}, "status": {}}
    assert nodes.changed("ADDED", node)[0]
    tainted = {**node, "spec": {"taints": [{"key": DISRUPTED_TAINT, "effect": "NoSchedule"}]}}
    assert nodes.changed("MODIFIED", tainted)[0]
    assert not nodes.changed("MODIFIED", tainted)[0]

    pools = EdgeFilter(nodepool_signature, lambda o: "p")
    pool: Obj = {"metadata": {"name": "p", "generation": 1}, "status": {}}
    assert pools.changed("ADDED", pool)[0]
    ready = {**pool, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert pools.changed("MODIFIED", ready)[0]
    assert not pools.changed("MODIFIED", {**ready, "status": {**ready["status"], "nodes": 3}})[0]


async def test_the_watches_survive_compaction_of_the_history(
    api: KubeAPIServer, sim: KarpenterSim, clock: object, kubeconfig: str
) -> None:
    # Each stream starts from the current state, so a compacted history (410 Gone for anyone
    # resuming from an old resourceVersion) never wedges the watches.
    from fleetgate.adapters.karpenter.watches import ChangeWatcher

    api.seed(nodepool("pool"))
    async with KarpenterGateway(clock, kubeconfig=kubeconfig) as gw:
        seen: list[str | None] = []
        watcher = ChangeWatcher(
            gw.api_client, NAMESPACE, seen.append, stream_seconds=1, retry_seconds=0.05
        )
        task = asyncio.create_task(watcher.run())
        await until(lambda: "pool" in seen)
        api.compact()
        await asyncio.sleep(1.2)  # every stream ended and was re-opened after the compaction
        seen.clear()
        sim.node("pool")
        await until(lambda: seen.count("pool") >= 2)  # the new claim and its node
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_the_watches_open_their_streams_on_the_gateways_one_client(
    api: KubeAPIServer, clock: object, kubeconfig: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A client per stream builds an SSL context from the system CA bundle, synchronously on the
    # event loop; six of them each time a replica starts leading stalled it past the renew
    # deadline, and the leader lost its lease before it could renew it.
    from kubernetes_asyncio.client import ApiClient

    from fleetgate.adapters.karpenter.watches import ChangeWatcher

    built: list[object] = []
    original = ApiClient.__init__

    def counting(self: ApiClient, *args: object, **kwargs: object) -> None:
        built.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(ApiClient, "__init__", counting)
    api.seed(nodepool("pool"))
    async with KarpenterGateway(clock, kubeconfig=kubeconfig) as gw:
        await gw.api_client()
        before = len(built)
        seen: list[str | None] = []
        watcher = ChangeWatcher(gw.api_client, NAMESPACE, seen.append, retry_seconds=0.05)
        task = asyncio.create_task(watcher.run())
        await until(lambda: "pool" in seen)  # the streams are open and delivering
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert len(built) == before == 1


async def test_an_error_event_ends_the_stream_with_its_status(
    api: KubeAPIServer, clock: object, kubeconfig: str
) -> None:
    from kubernetes_asyncio import client
    from kubernetes_asyncio.client.exceptions import ApiException

    from fleetgate.adapters.karpenter.watches import watch_events

    api.seed(nodepool("pool"))
    api.compact()  # resuming from before this is 410 Gone, sent as one ERROR event
    async with KarpenterGateway(clock, kubeconfig=kubeconfig) as gw:
        custom = client.CustomObjectsApi(await gw.api_client())
        events = watch_events(
            custom.list_cluster_custom_object,
            "karpenter.sh",
            "v1",
            "nodepools",
            resource_version="1",
            timeout_seconds=1,
        )
        with pytest.raises(ApiException) as raised:
            async for _ in events:
                pass
    assert raised.value.status == 410
