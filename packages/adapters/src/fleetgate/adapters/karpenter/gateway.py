"""The Karpenter gateway: the ``ClusterGateway`` port over the real Kubernetes API.

``karpenter.sh/v1`` NodePools and NodeClaims go through ``CustomObjectsApi``; Nodes and Pods
through ``CoreV1Api``. Reads come back as plain JSON and are turned into the domain's observation
values by ``views``; writes are JSON merge patches (``application/merge-patch+json``: a ``null``
deletes a key, nothing else of the object is touched), except the placeholder, which is created,
and the NodeClaim, which is deleted (that is how a drain starts: Karpenter cordons, evicts with
PDBs, and removes the node). Nothing here ever creates a NodeClaim or evicts a Pod itself.

The anchor write (``annotate_pool(expect_version=...)``) carries ``metadata.resourceVersion`` in
the merge patch: the API server applies it only if the NodePool is still at that version and
answers 409 otherwise, which becomes ``ClusterConflict`` so the controller requeues.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from fleetgate.adapters.karpenter import views
from fleetgate.adapters.karpenter.connection import (
    KARPENTER_GROUP,
    KARPENTER_VERSION,
    POLICY_GROUP,
    POLICY_VERSION,
    KarpenterOptions,
    KubernetesAPIError,
    connect,
    translate,
)
from fleetgate.adapters.karpenter.events import KubernetesEventSink
from fleetgate.adapters.karpenter.leader import LeaderElector
from fleetgate.adapters.karpenter.podspec import placeholder_pod
from fleetgate.adapters.karpenter.preflight import PreflightError, preflight
from fleetgate.adapters.karpenter.watches import ChangeWatcher
from fleetgate.domain.rotation.annotations import KARPENTER_NODEPOOL, SURGE_FOR
from fleetgate.domain.rotation.cluster import (
    ClusterConflict,
    ObjectUnreadable,
    PlaceholderSpec,
    PoolObservation,
)
from fleetgate.domain.rotation.reference import REFERENCE_GROUP
from fleetgate.domain.rotation.status import PolicyStatus

MERGE_PATCH = "application/merge-patch+json"
# kubernetes-asyncio honours ``_content_type`` at run time but its stubs omit it; without it a
# dict body would go out as a strategic merge patch, which custom resources do not accept.
AS_MERGE_PATCH: dict[str, Any] = {"_content_type": MERGE_PATCH}


#: Discovery, then one list per required resource (NodeClaims, NodePools), then one more
#: discovery for the versions on offer when v1 is missing.
PREFLIGHT_REQUESTS = 4


class KarpenterGateway:
    """A ``ClusterGateway`` for a cluster running Karpenter v1 (self-managed or EKS Auto Mode).

    Construction does no I/O; ``start()`` (or the first call) connects, ``close()`` disconnects.
    """

    def __init__(self, clock: Any, **options: Any) -> None:
        self.clock = clock
        self.options = KarpenterOptions.from_mapping(options)
        self._api: client.ApiClient | None = None
        self._lock = asyncio.Lock()
        self._policy_groups: dict[str, str] = {}  # policy name -> the API group it came from

    # --- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect to the API server (idempotent)."""
        await self.api_client()

    async def close(self) -> None:
        """Close the connection pool."""
        if self._api is not None:
            api, self._api = self._api, None
            await api.close()

    async def __aenter__(self) -> KarpenterGateway:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def api_client(self) -> client.ApiClient:
        """The connected API client, connecting on first use."""
        async with self._lock:
            if self._api is None:
                self._api = await connect(self.options)
            return self._api

    # --- deployment: preflight, leader election, events -------------------------------------

    async def preflight(self) -> None:
        """Fail with an actionable ``PreflightError`` unless Karpenter v1 is served and listable.

        Bounded: kubernetes-asyncio sets no timeout of its own, so an API server that accepts
        the connection and never answers would otherwise hold the controller's start forever.
        Each of the (at most) four requests gets ``request_timeout``.
        """
        bound = PREFLIGHT_REQUESTS * self.options.request_timeout
        try:
            async with asyncio.timeout(bound):
                await preflight(await self.api_client())
        except TimeoutError as exc:
            raise PreflightError(
                f"preflight: the API server did not answer within {bound:g}s "
                "(check that it is reachable and healthy, then restart the controller)"
            ) from exc

    def leader_elector(self) -> LeaderElector:
        """A Lease elector in the controller's namespace, with the configured timings."""
        return LeaderElector(
            self.api_client,
            namespace=self.options.namespace,
            name=self.options.lease_name,
            identity=self.options.identity,
            lease_duration=self.options.lease_duration,
            renew_deadline=self.options.renew_deadline,
            retry_period=self.options.retry_period,
        )

    async def watch(self, poke: Callable[[str | None], None]) -> None:
        """Until cancelled, ``poke(pool)`` (None: every pool) when something a pass waits for
        changes: see ``watches``."""
        await ChangeWatcher(self.api_client, self.options.namespace, poke).run()

    def event_sink(self) -> KubernetesEventSink:
        """An ``EventSink`` that records rotation events as Kubernetes Events."""
        return KubernetesEventSink(
            self.api_client, instance=self.options.identity, timeout=self.options.request_timeout
        )

    async def _custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(await self.api_client())

    async def _core(self) -> client.CoreV1Api:
        return client.CoreV1Api(await self.api_client())

    async def _json(self, model: Any) -> Any:
        """A typed client model as the API's own JSON (camelCase keys)."""
        return (await self.api_client()).sanitize_for_serialization(model)

    # --- reads -------------------------------------------------------------------------------

    async def list_pools(self) -> Sequence[str]:
        """Every NodePool's name, sorted."""
        custom = await self._custom()
        found = await self._call(
            "list nodepools",
            custom.list_cluster_custom_object(KARPENTER_GROUP, KARPENTER_VERSION, "nodepools"),
        )
        return sorted(str(item["metadata"]["name"]) for item in found.get("items") or ())

    async def observe(self, pool: str) -> PoolObservation | None:
        """One NodePool with its NodeClaims, Nodes, their Pods and its placeholders."""
        custom, core = await self._custom(), await self._core()
        nodepool = await self._call(
            f"get nodepool {pool}",
            custom.get_cluster_custom_object(KARPENTER_GROUP, KARPENTER_VERSION, "nodepools", pool),
            tolerate=404,
        )
        if nodepool is None:
            return None
        selector = f"{KARPENTER_NODEPOOL}={pool}"
        claims, nodes, placeholders = await asyncio.gather(
            self._call(
                f"list nodeclaims of {pool}",
                custom.list_cluster_custom_object(
                    KARPENTER_GROUP, KARPENTER_VERSION, "nodeclaims", label_selector=selector
                ),
            ),
            self._call(f"list nodes of {pool}", core.list_node(label_selector=selector)),
            self._call(
                f"list placeholders of {pool}",
                core.list_namespaced_pod(
                    self.options.namespace, label_selector=f"{selector},{SURGE_FOR}"
                ),
            ),
        )
        node_items = (await self._json(nodes)).get("items") or []
        pods = await self._pods_on([str(n["metadata"]["name"]) for n in node_items])
        placeholder_items = (await self._json(placeholders)).get("items") or []
        try:
            return views.pool_observation(
                nodepool,
                claims.get("items") or [],
                node_items,
                [p for p in pods if not self._is_placeholder(p)],
                placeholder_items,
            )
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            # A value neither Karpenter nor Kubernetes could have written: nothing is decided
            # on a guess, and the other pools are still served (the controller holds this one).
            # The views name the object and the field in their own errors.
            detail = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
            raise ObjectUnreadable(
                pool, f"{detail} (the pool is held until it can be read)"
            ) from exc

    async def _pods_on(self, nodes: Sequence[str]) -> list[dict[str, Any]]:
        """Every Pod bound to one of ``nodes`` (one field-selected list per node, bounded)."""
        core = await self._core()
        gate = asyncio.Semaphore(self.options.read_concurrency)

        async def on(node: str) -> list[dict[str, Any]]:
            async with gate:
                found = await self._call(
                    f"list pods on {node}",
                    core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}"),
                )
            return list((await self._json(found)).get("items") or [])

        return [pod for chunk in await asyncio.gather(*(on(n) for n in nodes)) for pod in chunk]

    def _is_placeholder(self, pod: Mapping[str, Any]) -> bool:
        meta = pod.get("metadata") or {}
        return meta.get("namespace") == self.options.namespace and SURGE_FOR in (
            meta.get("labels") or {}
        )

    async def list_policies(self) -> Sequence[Mapping[str, Any]] | None:
        """The RotationPolicy objects of ``fleetgate.io/v1alpha1`` and of the reference
        controller's ``noderotation.io/v1alpha1``; None if neither CRD is served.

        A ``fleetgate.io`` policy hides a ``noderotation.io`` one of the same name: that is how
        a policy moves group (apply the copy, then delete the original) without the two ever
        tying for the same pools, which would stop them rotating.
        """
        custom = await self._custom()
        served = False
        by_name: dict[str, Mapping[str, Any]] = {}
        groups: dict[str, str] = {}
        # The reference's first, so a fleetgate.io policy of the same name replaces it.
        for group in (REFERENCE_GROUP, POLICY_GROUP):
            found = await self._call(
                f"list rotationpolicies.{group}",
                custom.list_cluster_custom_object(group, POLICY_VERSION, "rotationpolicies"),
                tolerate=404,
            )
            if found is None:
                continue
            served = True
            for item in found.get("items") or []:
                by_name[str(item["metadata"]["name"])] = item
                groups[str(item["metadata"]["name"])] = group
        self._policy_groups = groups
        if not served:
            return None
        return [by_name[name] for name in sorted(by_name)]

    # --- writes ------------------------------------------------------------------------------

    async def annotate_pool(
        self, pool: str, patch: Mapping[str, str | None], *, expect_version: str | None = None
    ) -> str:
        """Merge-patch the NodePool's annotations, conditionally on ``expect_version``."""
        metadata: dict[str, Any] = {"annotations": dict(patch)}
        if expect_version is not None:
            metadata["resourceVersion"] = expect_version
        custom = await self._custom()
        updated = await self._call(
            f"annotate nodepool {pool}",
            custom.patch_cluster_custom_object(
                KARPENTER_GROUP,
                KARPENTER_VERSION,
                "nodepools",
                pool,
                {"metadata": metadata},
                **AS_MERGE_PATCH,
            ),
        )
        return str(updated["metadata"]["resourceVersion"])

    async def annotate_claim(self, name: str, patch: Mapping[str, str | None]) -> None:
        """Merge-patch a NodeClaim's annotations."""
        custom = await self._custom()
        await self._call(
            f"annotate nodeclaim {name}",
            custom.patch_cluster_custom_object(
                KARPENTER_GROUP,
                KARPENTER_VERSION,
                "nodeclaims",
                name,
                {"metadata": {"annotations": dict(patch)}},
                **AS_MERGE_PATCH,
            ),
        )

    async def annotate_node(self, name: str, patch: Mapping[str, str | None]) -> None:
        """Merge-patch a Node's annotations."""
        core = await self._core()
        await self._call(
            f"annotate node {name}",
            core.patch_node(name, {"metadata": {"annotations": dict(patch)}}, **AS_MERGE_PATCH),
        )

    async def set_unschedulable(self, node: str, unschedulable: bool) -> None:
        """Cordon or uncordon: ``spec.unschedulable`` true, or removed (as kubectl uncordon)."""
        core = await self._core()
        await self._call(
            f"{'cordon' if unschedulable else 'uncordon'} node {node}",
            core.patch_node(
                node,
                {"spec": {"unschedulable": True if unschedulable else None}},
                **AS_MERGE_PATCH,
            ),
        )

    async def create_placeholder(self, spec: PlaceholderSpec) -> None:
        """Create the placeholder Pod; an existing one of that name is kept."""
        body: Any = placeholder_pod(
            spec,
            default_image=self.options.placeholder_image,
            default_priority_class=self.options.priority_class,
        )
        core = await self._core()
        await self._call(  # 409 AlreadyExists: the placeholder of an earlier pass, kept
            f"create pod {spec.namespace}/{spec.name}",
            core.create_namespaced_pod(spec.namespace, body),
            tolerate=409,
        )

    async def delete_placeholder(self, namespace: str, name: str) -> None:
        """Delete a placeholder Pod; one already gone is fine."""
        core = await self._core()
        await self._call(
            f"delete pod {namespace}/{name}",
            core.delete_namespaced_pod(name, namespace, grace_period_seconds=0),
            tolerate=404,
        )

    async def delete_claim(self, name: str) -> None:
        """Delete a NodeClaim so that Karpenter drains its node; one already gone is fine."""
        custom = await self._custom()
        await self._call(
            f"delete nodeclaim {name}",
            custom.delete_cluster_custom_object(
                KARPENTER_GROUP, KARPENTER_VERSION, "nodeclaims", name
            ),
            tolerate=404,
        )

    async def write_policy_status(self, name: str, status: PolicyStatus) -> bool:
        """Merge-patch the RotationPolicy's status subresource; a 409 is False (requeue)."""
        custom = await self._custom()
        try:
            await self._call(
                f"write status of rotationpolicy {name}",
                custom.patch_cluster_custom_object_status(
                    self._policy_groups.get(name, POLICY_GROUP),
                    POLICY_VERSION,
                    "rotationpolicies",
                    name,
                    {"status": status.as_manifest()},
                    **AS_MERGE_PATCH,
                ),
            )
        except ClusterConflict:
            return False
        return True

    # --- one request -------------------------------------------------------------------------

    async def _call(self, what: str, request: Awaitable[Any], *, tolerate: int = 0) -> Any:
        """Await one API request within ``request_timeout``; errors become the port's.

        A response with status ``tolerate`` (404 for "already gone", 409 for "already there")
        is the idempotent success of a re-issued write, or a read of nothing: None.
        """
        try:
            async with asyncio.timeout(self.options.request_timeout):
                return await request
        except ApiException as exc:
            if exc.status == tolerate:
                return None
            raise translate(exc, what) from exc
        except (aiohttp.ClientError, TimeoutError) as exc:
            # kubernetes-asyncio sets no timeout of its own: a hung connection would hang the pass.
            reason = str(exc) or f"no answer within {self.options.request_timeout:g}s"
            raise KubernetesAPIError(f"{what}: the API server is unreachable: {reason}") from exc
