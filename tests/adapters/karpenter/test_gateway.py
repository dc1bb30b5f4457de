"""The Karpenter gateway against the local API server: what goes over the wire, what comes back."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fleetgate.adapters.karpenter.connection import KubernetesAPIError
from fleetgate.adapters.karpenter.gateway import KarpenterGateway
from fleetgate.domain.ports import ClusterGateway, ClusterRuntime, Leadership
from fleetgate.domain.rotation.cluster import (
    ClusterConflict,
    ObjectNotFound,
    PlaceholderSpec,
    Requirement,
)
from fleetgate.domain.rotation.status import PolicyStatus, ReadyCondition
from tests.adapters.karpenter.conftest import NAMESPACE
from tests.adapters.karpenter.karpenter_sim import KarpenterSim, nodepool
from tests.adapters.karpenter.kubeapi import DEFAULT_RESOURCES, KubeAPIServer
from tests.adapters.karpenter.kubeapi_store import chart_crd
from tests.ports import assert_implements

MERGE = "application/merge-patch+json"


def test_gateway_satisfies_the_ports(gateway: KarpenterGateway) -> None:
    assert_implements(gateway, ClusterGateway)
    assert_implements(gateway, ClusterRuntime)
    assert_implements(gateway.leader_elector(), Leadership)


async def test_observe_reads_the_pool_and_everything_hanging_off_it(
    api: KubeAPIServer, sim: KarpenterSim, gateway: KarpenterGateway
) -> None:
    api.seed(nodepool("default", limits={"cpu": "100"}))
    api.seed(nodepool("other"))
    claim, node = sim.node("default")
    sim.node("other")
    sim.pod("web", node, {"cpu": "500m"})
    sim.pod("ds", node, {"cpu": "100m"}, daemonset=True)
    api.requests.clear()

    obs = await gateway.observe("default")

    assert obs is not None
    assert [c.name for c in obs.claims] == [claim]
    assert [n.name for n in obs.nodes] == [node]
    assert {(p.name, p.owner_kind) for p in obs.pods} == {("web", None), ("ds", "DaemonSet")}
    assert obs.limits == {"cpu": 100_000}
    assert obs.version == api.get("NodePool", "default")["metadata"]["resourceVersion"]  # type: ignore[index]
    reads = {(r.method, r.path, tuple(sorted(r.query.items()))) for r in api.requests}
    assert reads == {
        ("GET", "/apis/karpenter.sh/v1/nodepools/default", ()),
        (
            "GET",
            "/apis/karpenter.sh/v1/nodeclaims",
            (("labelSelector", "karpenter.sh/nodepool=default"),),
        ),
        ("GET", "/api/v1/nodes", (("labelSelector", "karpenter.sh/nodepool=default"),)),
        (
            "GET",
            f"/api/v1/namespaces/{NAMESPACE}/pods",
            (("labelSelector", "karpenter.sh/nodepool=default,fleetgate.io/surge-for"),),
        ),
        ("GET", "/api/v1/pods", (("fieldSelector", f"spec.nodeName={node}"),)),
    }
    assert api.writes() == []


async def test_observe_of_a_missing_pool_is_none(gateway: KarpenterGateway) -> None:
    assert await gateway.observe("nope") is None


async def test_list_pools_is_sorted(api: KubeAPIServer, gateway: KarpenterGateway) -> None:
    for name in ("b", "a", "c"):
        api.seed(nodepool(name))
    assert await gateway.list_pools() == ["a", "b", "c"]


async def test_placeholders_are_reported_apart_from_workload(
    api: KubeAPIServer, sim: KarpenterSim, gateway: KarpenterGateway
) -> None:
    api.seed(nodepool("default"))
    claim, _ = sim.node("default")
    await gateway.create_placeholder(_placeholder(claim))
    sim.provision()
    obs = await gateway.observe("default")
    assert obs is not None
    assert [p.name for p in obs.placeholders] == [f"fleetgate-surge-{claim}"]
    assert obs.placeholders[0].phase == "Running"
    assert all(p.name != f"fleetgate-surge-{claim}" for p in obs.pods)


async def test_annotation_writes_are_merge_patches_with_null_deletes(
    api: KubeAPIServer, sim: KarpenterSim, gateway: KarpenterGateway
) -> None:
    api.seed(nodepool("default"))
    claim, node = sim.node("default")
    api.requests.clear()

    await gateway.annotate_claim(claim, {"fleetgate.io/state": "pending", "gone": None})
    await gateway.annotate_node(node, {"fleetgate.io/surge-for": claim})
    await gateway.set_unschedulable(node, True)
    await gateway.set_unschedulable(node, False)

    assert [(r.method, r.path, r.content_type, r.body) for r in api.writes()] == [
        (
            "PATCH",
            f"/apis/karpenter.sh/v1/nodeclaims/{claim}",
            MERGE,
            {"metadata": {"annotations": {"fleetgate.io/state": "pending", "gone": None}}},
        ),
        (
            "PATCH",
            f"/api/v1/nodes/{node}",
            MERGE,
            {"metadata": {"annotations": {"fleetgate.io/surge-for": claim}}},
        ),
        ("PATCH", f"/api/v1/nodes/{node}", MERGE, {"spec": {"unschedulable": True}}),
        ("PATCH", f"/api/v1/nodes/{node}", MERGE, {"spec": {"unschedulable": None}}),
    ]
    assert api.get("NodeClaim", claim)["metadata"]["annotations"] == {  # type: ignore[index]
        "fleetgate.io/state": "pending"
    }
    assert "unschedulable" not in api.get("Node", node)["spec"]  # type: ignore[index]


async def test_pool_annotation_returns_the_new_version(
    api: KubeAPIServer, gateway: KarpenterGateway
) -> None:
    api.seed(nodepool("default"))
    version = await gateway.annotate_pool("default", {"fleetgate.io/last-rotation-at": "x"})
    stored = api.get("NodePool", "default")
    assert stored is not None and stored["metadata"]["resourceVersion"] == version
    assert stored["metadata"]["annotations"] == {"fleetgate.io/last-rotation-at": "x"}
    assert "resourceVersion" not in api.writes()[-1].body["metadata"]  # unconditional


async def test_anchor_write_carries_the_version_read_at_the_start_of_the_pass(
    api: KubeAPIServer, gateway: KarpenterGateway
) -> None:
    api.seed(nodepool("default"))
    obs = await gateway.observe("default")
    assert obs is not None
    await gateway.annotate_pool(
        "default", {"fleetgate.io/active-rotation": "c1"}, expect_version=obs.version
    )
    assert api.writes()[-1].body == {
        "metadata": {
            "annotations": {"fleetgate.io/active-rotation": "c1"},
            "resourceVersion": obs.version,
        }
    }


async def test_stale_anchor_write_is_a_conflict_and_changes_nothing(
    api: KubeAPIServer, gateway: KarpenterGateway
) -> None:
    api.seed(nodepool("default"))
    obs = await gateway.observe("default")
    assert obs is not None
    # Somebody else (an operator, another replica) writes the pool after our read.
    api.modify(
        "NodePool", "default", lambda o: o["metadata"].setdefault("labels", {}).update(x="1")
    )
    before = api.get("NodePool", "default")

    with pytest.raises(ClusterConflict, match="409"):
        await gateway.annotate_pool(
            "default", {"fleetgate.io/active-rotation": "c1"}, expect_version=obs.version
        )
    assert api.get("NodePool", "default") == before


async def test_writes_to_missing_objects_are_not_found(gateway: KarpenterGateway) -> None:
    with pytest.raises(ObjectNotFound):
        await gateway.annotate_claim("gone", {"a": "b"})
    with pytest.raises(ObjectNotFound):
        await gateway.annotate_pool("gone", {"a": "b"})
    with pytest.raises(ObjectNotFound):
        await gateway.set_unschedulable("gone", True)


async def test_other_api_errors_are_reported_not_swallowed(
    api: KubeAPIServer, gateway: KarpenterGateway
) -> None:
    api.seed(nodepool("default"))
    api.fail_next("PATCH", "/nodepools/default", 500)
    with pytest.raises(KubernetesAPIError, match="annotate nodepool default: 500"):
        await gateway.annotate_pool("default", {"a": "b"})


async def test_a_hung_request_is_an_error_within_the_request_timeout(
    api: KubeAPIServer, clock: object, kubeconfig: str
) -> None:
    api.seed(nodepool("default"))
    api.stall_next("GET", "/nodepools/default$", 5.0)
    async with KarpenterGateway(clock, kubeconfig=kubeconfig, request_timeout=0.2) as gw:
        with pytest.raises(
            KubernetesAPIError, match=r"get nodepool default: .*no answer within 0.2s"
        ):
            await gw.observe("default")


async def test_placeholder_create_posts_the_pod_and_tolerates_an_existing_one(
    api: KubeAPIServer, gateway: KarpenterGateway
) -> None:
    spec = _placeholder("c1")
    await gateway.create_placeholder(spec)
    await gateway.create_placeholder(spec)  # the next pass re-asserts it: kept, no error
    posts = [r for r in api.writes() if r.method == "POST"]
    assert [r.path for r in posts] == [f"/api/v1/namespaces/{NAMESPACE}/pods"] * 2
    assert posts[0].body["metadata"]["name"] == "fleetgate-surge-c1"
    assert posts[0].body["spec"]["priorityClassName"] == "fleetgate-placeholder"
    assert len(api.list("Pod", NAMESPACE)) == 1


async def test_placeholder_delete_is_idempotent(
    api: KubeAPIServer, gateway: KarpenterGateway
) -> None:
    await gateway.create_placeholder(_placeholder("c1"))
    await gateway.delete_placeholder(NAMESPACE, "fleetgate-surge-c1")
    await gateway.delete_placeholder(NAMESPACE, "fleetgate-surge-c1")
    deletes = [r for r in api.writes() if r.method == "DELETE"]
    assert [r.path for r in deletes] == [
        f"/api/v1/namespaces/{NAMESPACE}/pods/fleetgate-surge-c1"
    ] * 2
    assert api.list("Pod", NAMESPACE) == []


async def test_deleting_a_claim_starts_karpenters_drain(
    api: KubeAPIServer, sim: KarpenterSim, gateway: KarpenterGateway
) -> None:
    api.seed(nodepool("default"))
    claim, node = sim.node("default")
    await gateway.delete_claim(claim)
    stored = api.get("NodeClaim", claim)
    assert stored is not None and stored["metadata"]["deletionTimestamp"]  # the finalizer holds it
    await gateway.delete_claim(claim)  # re-issued by a restarted controller: fine
    sim.terminate()
    await gateway.delete_claim(claim)  # gone: fine
    assert [(r.method, r.path) for r in api.writes()] == [
        ("DELETE", f"/apis/karpenter.sh/v1/nodeclaims/{claim}")
    ] * 3
    assert api.get("NodeClaim", claim) is None and api.get("Node", node) is None


async def test_policies_come_from_the_crd_when_it_is_served(
    api: KubeAPIServer, gateway: KarpenterGateway
) -> None:
    assert await gateway.list_policies() is None  # CRD not installed: the controller uses files
    _serve_policy_crd(api)
    for name in ("b", "a"):
        _seed_policy(api, {"name": name})
    policies = await gateway.list_policies()
    assert policies is not None and [p["metadata"]["name"] for p in policies] == ["a", "b"]


async def test_a_fleetgate_policy_hides_the_reference_policy_of_the_same_name(
    api: KubeAPIServer, gateway: KarpenterGateway
) -> None:
    # Moving a policy to fleetgate.io (migration guide, step 7) never makes two policies tie.
    _serve_policy_crd(api, "rotationpolicies.noderotation.io")
    for group, name, team in (
        ("noderotation.io", "web", "old"),
        ("noderotation.io", "batch", "batch"),
        ("fleetgate.io", "web", "new"),
    ):
        _seed_policy(api, {"name": name}, group, {"matchLabels": {"team": team}})
    policies = await gateway.list_policies()
    assert policies is not None
    assert [(p["apiVersion"], p["metadata"]["name"]) for p in policies] == [
        ("noderotation.io/v1alpha1", "batch"),
        ("fleetgate.io/v1alpha1", "web"),
    ]
    assert policies[1]["spec"]["nodePoolSelector"] == {"matchLabels": {"team": "new"}}


def _placeholder(claim: str) -> PlaceholderSpec:
    return PlaceholderSpec(
        namespace=NAMESPACE,
        name=f"fleetgate-surge-{claim}",
        pool="default",
        surge_for=claim,
        requests={"cpu": 500},
        required=(Requirement("karpenter.sh/nodepool", "In", ("default",)),),
        labels={"fleetgate.io/surge-for": claim, "karpenter.sh/nodepool": "default"},
    )


WINDOW = {"timezone": "UTC", "days": ["Sat"], "start": "01:00", "end": "05:00"}


def _serve_policy_crd(api: KubeAPIServer, *more: str) -> None:
    """Serve the chart's fleetgate.io RotationPolicy CRD (and the named others), with schemas."""
    api.resources = (
        *DEFAULT_RESOURCES,
        chart_crd("rotationpolicies.fleetgate.io"),
        *(chart_crd(name) for name in more),
    )


def _seed_policy(
    api: KubeAPIServer,
    metadata: dict[str, object],
    group: str = "fleetgate.io",
    selector: dict[str, object] | None = None,
) -> None:
    api.seed(
        {
            "apiVersion": f"{group}/v1alpha1",
            "kind": "RotationPolicy",
            "metadata": metadata,
            "spec": {"nodePoolSelector": selector or {}, "maintenanceWindows": [WINDOW]},
        }
    )


def _with_policy_crd(api: KubeAPIServer) -> None:
    _serve_policy_crd(api)
    _seed_policy(api, {"name": "web", "generation": 2})


def _policy_status() -> PolicyStatus:
    return PolicyStatus(
        observed_generation=2,
        matched_node_pools=("default",),
        rotating_node_pools=(),
        ready=ReadyCondition(
            True, "Accepted", "valid and governs 1 NodePool(s)", datetime(2026, 1, 4, tzinfo=UTC)
        ),
    )


async def test_a_policy_status_is_a_merge_patch_of_the_status_subresource(
    api: KubeAPIServer, gateway: KarpenterGateway
) -> None:
    _with_policy_crd(api)
    spec_before = (api.get("RotationPolicy", "web") or {})["spec"]
    api.requests.clear()

    assert await gateway.write_policy_status("web", _policy_status()) is True

    [write] = api.writes()
    assert (write.method, write.path, write.content_type) == (
        "PATCH",
        "/apis/fleetgate.io/v1alpha1/rotationpolicies/web/status",
        MERGE,
    )
    assert write.body == {"status": _policy_status().as_manifest()}
    stored = api.get("RotationPolicy", "web")
    assert stored is not None and stored["status"]["conditions"][0]["reason"] == "Accepted"
    assert stored["spec"] == spec_before  # the subresource touches only status


async def test_a_conflicting_policy_status_write_is_false_not_an_error(
    api: KubeAPIServer, gateway: KarpenterGateway
) -> None:
    _with_policy_crd(api)
    api.fail_next("PATCH", r"/rotationpolicies/web/status$", 409)

    assert await gateway.write_policy_status("web", _policy_status()) is False
    assert "status" not in (api.get("RotationPolicy", "web") or {})
    with pytest.raises(ObjectNotFound):
        await gateway.write_policy_status("gone", _policy_status())
