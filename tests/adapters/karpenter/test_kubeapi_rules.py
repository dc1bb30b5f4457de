"""The local API server behaves like a real one where the gateway could tell the difference:
generation, CRD defaults, status subresource rules, 410 Gone, graceful Pod deletion."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import aiohttp
import pytest

from fleetgate.adapters.clock import VirtualClock
from tests.adapters.karpenter.karpenter_sim import KarpenterSim, nodepool
from tests.adapters.karpenter.kubeapi import KubeAPIServer

POOLS = "/apis/karpenter.sh/v1/nodepools"
MERGE = {"Content-Type": "application/merge-patch+json"}


@pytest.fixture
async def http(api: KubeAPIServer) -> AsyncIterator[aiohttp.ClientSession]:
    """A plain HTTP client of the local server."""
    async with aiohttp.ClientSession(api.url) as session:
        yield session


async def _json(response: aiohttp.ClientResponse) -> Any:
    async with response:
        return await response.json()


async def test_generation_moves_with_the_spec_only(http: aiohttp.ClientSession) -> None:
    body = nodepool("p")
    created = await _json(await http.post(POOLS, json=body))
    assert created["metadata"]["generation"] == 1
    annotated = await _json(
        await http.patch(
            f"{POOLS}/p", data=json.dumps({"metadata": {"annotations": {"a": "b"}}}), headers=MERGE
        )
    )
    assert annotated["metadata"]["generation"] == 1  # metadata is not spec
    status = await _json(
        await http.patch(
            f"{POOLS}/p/status", data=json.dumps({"status": {"nodes": 2}}), headers=MERGE
        )
    )
    assert status["metadata"]["generation"] == 1 and status["status"]["nodes"] == 2
    changed = await _json(
        await http.patch(
            f"{POOLS}/p", data=json.dumps({"spec": {"limits": {"cpu": "8"}}}), headers=MERGE
        )
    )
    assert changed["metadata"]["generation"] == 2


async def test_crd_defaults_are_applied_on_create(http: aiohttp.ClientSession) -> None:
    body = nodepool("p")
    del body["spec"]["template"]["spec"]["expireAfter"], body["spec"]["disruption"]
    created = await _json(await http.post(POOLS, json=body))
    assert created["spec"]["template"]["spec"]["expireAfter"] == "720h"
    assert created["spec"]["disruption"] == {
        "consolidateAfter": "0s",
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "budgets": [{"nodes": "10%"}],
    }
    claim = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "c"},
        "spec": {"requirements": []},
    }
    made = await _json(await http.post("/apis/karpenter.sh/v1/nodeclaims", json=claim))
    assert made["spec"]["expireAfter"] == "720h"


async def test_status_and_main_resource_writes_touch_only_their_part(
    http: aiohttp.ClientSession, api: KubeAPIServer
) -> None:
    created = await _json(await http.post(POOLS, json=nodepool("p")))
    assert "status" not in created  # a CRD's status is not set by its creator
    sneaky = {"metadata": {"annotations": {"a": "b"}}, "status": {"nodes": 7}}
    main = await _json(await http.patch(f"{POOLS}/p", data=json.dumps(sneaky), headers=MERGE))
    assert main["metadata"]["annotations"] == {"a": "b"} and "status" not in main
    api.modify("NodePool", "p", lambda o: o.update(status={"nodes": 1}))
    current = api.get("NodePool", "p")
    assert current is not None
    current["status"] = {"nodes": 3}
    current["metadata"]["annotations"] = {"ignored": "yes"}
    current["spec"]["limits"] = {"cpu": "1"}
    put = await _json(await http.put(f"{POOLS}/p/status", json=current))
    assert put["status"] == {"nodes": 3}
    assert put["metadata"]["annotations"] == {"a": "b"} and "limits" not in put["spec"]
    replaced = dict(put, status={"nodes": 0})
    out = await _json(await http.put(f"{POOLS}/p", json=replaced))
    assert out["status"] == {"nodes": 3}  # the main resource ignores status


async def test_a_watch_resuming_from_a_compacted_version_gets_410(
    http: aiohttp.ClientSession, api: KubeAPIServer
) -> None:
    await _json(await http.post(POOLS, json=nodepool("p")))
    old = api.get("NodePool", "p")["metadata"]["resourceVersion"]  # type: ignore[index]
    api.modify("NodePool", "p", lambda o: o["metadata"].update(labels={"x": "y"}))
    api.compact()
    async with http.get(POOLS, params={"watch": "true", "resourceVersion": old}) as response:
        events = [json.loads(line) for line in (await response.text()).splitlines()]
    assert [e["type"] for e in events] == ["ERROR"]
    assert events[0]["object"]["code"] == 410 and events[0]["object"]["reason"] == "Expired"
    # From the current version (or none) the watch works as before.
    fresh = api.get("NodePool", "p")["metadata"]["resourceVersion"]  # type: ignore[index]
    params = {"watch": "true", "resourceVersion": fresh, "timeoutSeconds": "0.2"}
    async with http.get(POOLS, params=params) as response:
        assert (await response.text()) == ""


async def test_a_bound_pod_terminates_for_its_grace_period(
    http: aiohttp.ClientSession, api: KubeAPIServer, sim: KarpenterSim, clock: VirtualClock
) -> None:
    api.seed(nodepool("pool"))
    _, node = sim.node("pool")
    sim.pod("web-0", node, {"cpu": "1"})
    pods = "/api/v1/namespaces/apps/pods"
    deleted = await _json(await http.delete(f"{pods}/web-0"))
    assert (
        deleted["metadata"]["deletionTimestamp"]
        and deleted["metadata"]["deletionGracePeriodSeconds"] == 30
    )
    again = api.get("Pod", "web-0", "apps")
    assert again is not None  # still there, terminating
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0"}, "spec": {}}
    async with http.post(pods, json=body) as response:
        assert response.status == 409  # an immediate re-create meets the terminating Pod
    clock.advance(timedelta(seconds=31))
    async with http.post(pods, json=body) as response:
        assert response.status == 201  # its grace period is over: it is gone
        assert (await response.json())["status"] == {"phase": "Pending"}
    # Grace 0 (or an unbound Pod) goes at once.
    sim.pod("web-1", node, {"cpu": "1"})
    await _json(await http.delete(f"{pods}/web-1", params={"gracePeriodSeconds": "0"}))
    assert api.get("Pod", "web-1", "apps") is None
    await _json(await http.delete(f"{pods}/web-0"))  # unbound (created without a node)
    assert api.get("Pod", "web-0", "apps") is None
