"""Least privilege, derived: the chart's roles grant exactly the verbs the controller sends.

Two controller replicas, wired by the production composition root from settings, run a full
rotation of a pool governed by a RotationPolicy served from the cluster, with a leader hand-over
(SIGTERM) in the middle, against the recording API server. Every request it logged is turned into
(scope, group, resource, verb) the way the API server's authorizer sees it, and the ClusterRole and
Role ``helm template`` renders must be exactly that: nothing the code sends is missing (it would be
a 403 in a cluster) and nothing granted goes unused.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from dependency_injector import providers

from fleetgate.adapters.clock import VirtualClock
from fleetgate.apps.container import build_container
from fleetgate.apps.controller.runtime import run_on_cluster
from fleetgate.apps.controller.shell import PassResult
from fleetgate.apps.settings import load_settings
from fleetgate.domain.rotation import annotations as ann
from tests.adapters.karpenter.karpenter_sim import KarpenterSim, nodepool
from tests.adapters.karpenter.kubeapi import DEFAULT_RESOURCES, KubeAPIServer, Request, Resource
from tests.apps.controller.test_runtime import FAST, karpenter_loop
from tests.deploy.helm import template
from tests.waiting import until

NAMESPACE = "fleetgate-system"
Grant = tuple[str, str, str]  # (api group, resource[/subresource], verb)
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


def authorized_as(request: Request) -> tuple[str | None, Grant] | None:
    """(namespace or None, grant) an authorizer checks for ``request``; None for discovery."""
    parts = [p for p in request.path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"]:
        group, rest = parts[1], parts[3:]
    else:
        return None
    if not rest:
        return None  # /api, /apis, /apis/<group>[/<version>]: discovery, allowed to everyone
    namespace = None
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    resource = "/".join([rest[0], *rest[2:3]])
    named = len(rest) >= 2
    if request.method == "GET":
        verb = "get" if named else ("watch" if request.query.get("watch") else "list")
    elif request.method == "DELETE":
        verb = "delete" if named else "deletecollection"
    else:
        verb = _VERBS[request.method]
    return namespace, (group, resource, verb)


def granted(role: dict[str, Any]) -> set[Grant]:
    """Every (group, resource, verb) a rendered Role or ClusterRole grants."""
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


class Replica:
    """One controller process as ``fleetgate controller`` builds it from its settings."""

    def __init__(self, name: str, api: KubeAPIServer, clock: VirtualClock, tmp: Path) -> None:
        config = tmp / f"kubeconfig-{name}"
        config.write_text(api.kubeconfig(token=name))
        settings = load_settings(
            cluster="karpenter",
            cluster_options={"kubeconfig": str(config), "identity": name, **FAST},
            controller={"namespace": NAMESPACE, "metrics_port": None, "probes_port": None},
        )
        container = build_container(settings)
        container.clock.override(providers.Object(clock))
        self.controller = container.rotation_controller()
        self.passes: list[PassResult] = []
        self.controller.on_pass = self.passes.append
        self.task: asyncio.Task[list[PassResult]] | None = None

    def start(self, loop: Callable[..., Any]) -> None:
        self.task = asyncio.create_task(run_on_cluster(self.controller, loop))

    async def stop(self) -> None:
        """SIGTERM: the loop is cancelled and the Lease released."""
        assert self.task is not None
        self.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self.task
        await self.controller.cluster.close()


@pytest.fixture
async def api() -> AsyncIterator[tuple[KubeAPIServer, VirtualClock]]:
    clock = VirtualClock(datetime(2026, 1, 7, 2, 0, tzinfo=UTC))
    async with KubeAPIServer(now=clock.now) as server:
        server.resources = (
            *DEFAULT_RESOURCES,
            Resource("fleetgate.io", "v1alpha1", "rotationpolicies", "RotationPolicy", False),
            Resource("noderotation.io", "v1alpha1", "rotationpolicies", "RotationPolicy", False),
        )
        yield server, clock


async def _rotate_with_hand_over(api: KubeAPIServer, clock: VirtualClock, tmp: Path) -> None:
    api.seed(
        {
            "apiVersion": "fleetgate.io/v1alpha1",
            "kind": "RotationPolicy",
            "metadata": {"name": "always", "generation": 1},
            "spec": {
                "nodePoolSelector": {},
                "maintenanceWindows": [
                    {
                        "timezone": "UTC",
                        "days": ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"],
                        "start": "00:00",
                        "end": "24:00",
                    }
                ],
            },
        }
    )
    # A reference controller's policy, applied unchanged: it governs nothing here, but it is
    # read, watched and given a status like fleetgate's own.
    api.seed(
        {
            "apiVersion": "noderotation.io/v1alpha1",
            "kind": "RotationPolicy",
            "metadata": {"name": "reference", "generation": 1},
            "spec": {
                "nodePoolSelector": {"matchLabels": {"team": "elsewhere"}},
                "maintenanceWindows": [
                    {"timezone": "UTC", "days": ["Sun"], "start": "01:00", "end": "05:00"}
                ],
            },
        }
    )
    sim = KarpenterSim(api)
    api.seed(nodepool("pool", expire_after="336h", tgp="1h"))
    old, node = sim.node("pool", created=clock.now() - timedelta(days=14) + timedelta(minutes=30))
    sim.pod("web-0", node, {"cpu": "3"})
    a, b = Replica("replica-a", api, clock, tmp), Replica("replica-b", api, clock, tmp)
    sim.shortage = True  # the surge waits, so the hand-over happens mid-rotation
    a.start(karpenter_loop(a, sim, clock))  # type: ignore[arg-type]
    await until(lambda: bool(a.passes))
    b.start(karpenter_loop(b, sim, clock))  # type: ignore[arg-type]
    await until(lambda: bool(api.list("Pod", NAMESPACE)))  # a created the placeholder
    await a.stop()
    sim.shortage = False
    await until(lambda: ann.LAST_ROTATION_AT in _annotations(api))
    assert b.passes and api.get("NodeClaim", old) is None  # b finished what a started
    for name in ("always", "reference"):
        status = _policy(api, name).get("status") or {}
        assert status.get("conditions"), f"the status of {name} was written"
    assert _policy(api, "reference")["status"]["matchedNodePools"] == 0  # the reference's shape
    await b.stop()


def _policy(api: KubeAPIServer, name: str) -> dict[str, Any]:
    [found] = [
        p
        for res in api.resources
        if res.plural == "rotationpolicies"
        for p in api.list(f"rotationpolicies.{res.group}")
        if p["metadata"]["name"] == name
    ]
    return found


def _annotations(api: KubeAPIServer) -> dict[str, str]:
    return dict((api.get("NodePool", "pool") or {})["metadata"].get("annotations") or {})


async def test_the_rendered_roles_grant_exactly_what_a_rotation_and_a_hand_over_send(
    api: tuple[KubeAPIServer, VirtualClock], tmp_path: Path
) -> None:
    server, clock = api
    await _rotate_with_hand_over(server, clock, tmp_path)
    cluster_wide: set[Grant] = set()
    in_namespace: set[Grant] = set()
    for request in server.requests:
        seen = authorized_as(request)
        if seen is None:
            continue
        namespace, grant = seen
        (in_namespace if namespace == NAMESPACE else cluster_wide).add(grant)

    docs = template({"database": {"existingSecret": "db"}}, namespace=NAMESPACE)
    [cluster_role] = [d for d in docs if d["kind"] == "ClusterRole"]
    [role] = [d for d in docs if d["kind"] == "Role"]
    assert role["metadata"]["namespace"] == NAMESPACE
    assert granted(cluster_role) == cluster_wide
    # The Role adds what only the release namespace needs; nothing the ClusterRole has already.
    assert granted(role) == in_namespace - cluster_wide
    assert ("coordination.k8s.io", "leases", "update") in granted(role)  # renewals were seen


def test_a_request_maps_to_what_the_authorizer_checks() -> None:
    def req(method: str, path: str, **query: str) -> Request:
        return Request(method, path, query, None, None)

    assert authorized_as(req("GET", "/apis/karpenter.sh/v1")) is None
    assert authorized_as(req("GET", "/api/v1/nodes", watch="true")) == (
        None,
        ("", "nodes", "watch"),
    )
    assert authorized_as(req("PATCH", "/apis/fleetgate.io/v1alpha1/rotationpolicies/p/status")) == (
        None,
        ("fleetgate.io", "rotationpolicies/status", "patch"),
    )
    assert authorized_as(req("DELETE", "/api/v1/namespaces/n/pods/x")) == (
        "n",
        ("", "pods", "delete"),
    )
    assert authorized_as(req("PUT", "/apis/coordination.k8s.io/v1/namespaces/n/leases/l")) == (
        "n",
        ("coordination.k8s.io", "leases", "update"),
    )
