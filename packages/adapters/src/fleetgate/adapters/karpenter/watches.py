"""Watches that wake the controller as soon as something it waits for happens (spec 10).

The controller is correct without them: every pool is re-read on its requeue cadence (30 s while a
rotation moves, 1 min otherwise). Watches only cut the wait, edge-triggered on exactly what the
rotation machine waits for, so that the controller's own annotation writes do not wake it again:

* a NodePool appearing, disappearing, changing its spec or labels (``generation``/labels), or
  its Ready condition (a not-Ready pool blocks starts until it is Ready again);
* a pool's NodeClaim appearing, disappearing, becoming Ready, getting a node, starting to delete,
  or Karpenter marking it (``DisruptionReason``, ``Drifted``);
* a pool's Node appearing Ready or becoming Ready (a surge node is up), or Karpenter tainting it
  ``karpenter.sh/disrupted``;
* a placeholder Pod being scheduled, running, unschedulable or gone;
* any RotationPolicy change (every pool may be governed differently): ``poke(None)``.

Each watch runs until cancelled; a dropped or failed stream is re-opened after a short pause.
Every stream starts from the current state (no ``resourceVersion``), never resuming from an old
one, so etcd compaction (``410 Gone``) cannot wedge it; the edge filter drops what it has seen.

Streams are read here, over the gateway's one API client, rather than with
``kubernetes_asyncio.watch.Watch``: that class builds a fresh ``ApiClient`` per stream, and with
it an SSL context loading the system CA bundle, synchronously on the event loop, and turns every
event into a model object nobody reads. With six watches (re)opened whenever a replica starts
leading, that stalled the loop for longer than the lease's renew deadline, so the leader lost
its lease before it could renew it, over and over.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Hashable
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from fleetgate.adapters.karpenter.connection import (
    KARPENTER_GROUP,
    KARPENTER_VERSION,
    POLICY_GROUP,
    POLICY_VERSION,
)
from fleetgate.domain.rotation.annotations import KARPENTER_NODEPOOL, SURGE_FOR
from fleetgate.domain.rotation.disruption import DISRUPTED_TAINT
from fleetgate.domain.rotation.reference import REFERENCE_GROUP

Poke = Callable[[str | None], None]
Obj = dict[str, Any]
_log = logging.getLogger(__name__)


def _ready(obj: Obj, kind: str = "Ready") -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or ()
    )


def _pool_of(obj: Obj) -> str | None:
    return ((obj.get("metadata") or {}).get("labels") or {}).get(KARPENTER_NODEPOOL)


def nodepool_signature(obj: Obj) -> Hashable:
    """What of a NodePool can change a pass: its spec (generation), its labels, its Ready."""
    meta = obj.get("metadata") or {}
    labels = tuple(sorted((meta.get("labels") or {}).items()))
    return (meta.get("generation"), labels, _ready(obj))


def nodeclaim_signature(obj: Obj) -> Hashable:
    """Readiness, the bound node and deletion (what a pending or draining rotation waits for),
    and Karpenter's own disruption marks (they change who may be picked)."""
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    return (
        _ready(obj),
        status.get("nodeName"),
        bool(meta.get("deletionTimestamp")),
        _ready(obj, "DisruptionReason"),
        _ready(obj, "Drifted"),
    )


def node_signature(obj: Obj) -> Hashable:
    """A surge node matters once it is Ready; any node once Karpenter taints it disrupted."""
    taints = (obj.get("spec") or {}).get("taints") or ()
    return (_ready(obj), any(t.get("key") == DISRUPTED_TAINT for t in taints))


def placeholder_signature(obj: Obj) -> Hashable:
    """Scheduled, running, or reported unschedulable."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    scheduled = next(
        (
            c.get("status")
            for c in status.get("conditions") or ()
            if c.get("type") == "PodScheduled"
        ),
        None,
    )
    return (status.get("phase"), spec.get("nodeName"), scheduled)


class EdgeFilter:
    """Remembers each object's signature and reports a pool only when the signature changes."""

    def __init__(
        self, signature: Callable[[Obj], Hashable], pool: Callable[[Obj], str | None]
    ) -> None:
        self._signature, self._pool = signature, pool
        self._seen: dict[tuple[str, str], Hashable] = {}

    def changed(self, kind: str, obj: Obj) -> tuple[bool, str | None]:
        """(whether to wake the controller, the pool concerned) for one watch event."""
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        if kind == "DELETED":
            self._seen.pop(key, None)
            return True, self._pool(obj)
        if kind not in ("ADDED", "MODIFIED"):
            return False, None
        signature = self._signature(obj)
        if self._seen.get(key, _UNSEEN) == signature:
            return False, None
        self._seen[key] = signature
        return True, self._pool(obj)


_UNSEEN = object()


class ChangeWatcher:
    """Runs the watches of one controller replica and pokes it on every relevant change."""

    def __init__(
        self,
        api_client: Callable[[], Awaitable[client.ApiClient]],
        namespace: str,
        poke: Poke,
        *,
        stream_seconds: int = 300,
        retry_seconds: float = 5.0,
    ) -> None:
        self._api_client = api_client
        self.namespace = namespace
        self.poke = poke
        self.stream_seconds = stream_seconds
        self.retry_seconds = retry_seconds

    async def run(self) -> None:
        """Watch until cancelled."""
        api = await self._api_client()
        custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
        watches = [
            self._watch(
                "nodepools",
                EdgeFilter(nodepool_signature, _name),
                custom.list_cluster_custom_object,
                KARPENTER_GROUP,
                KARPENTER_VERSION,
                "nodepools",
            ),
            self._watch(
                "nodeclaims",
                EdgeFilter(nodeclaim_signature, _pool_of),
                custom.list_cluster_custom_object,
                KARPENTER_GROUP,
                KARPENTER_VERSION,
                "nodeclaims",
                label_selector=KARPENTER_NODEPOOL,
            ),
            self._watch(
                "nodes",
                EdgeFilter(node_signature, _pool_of),
                core.list_node,
                label_selector=KARPENTER_NODEPOOL,
            ),
            self._watch(
                "placeholders",
                EdgeFilter(placeholder_signature, _pool_of),
                core.list_namespaced_pod,
                self.namespace,
                label_selector=f"{KARPENTER_NODEPOOL},{SURGE_FOR}",
            ),
        ]
        for group in (POLICY_GROUP, REFERENCE_GROUP):  # the reference's policies govern too
            if await self._policies_served(custom, group):
                watches.append(
                    self._watch(
                        f"rotationpolicies.{group}",
                        EdgeFilter(nodepool_signature, lambda _: None),
                        custom.list_cluster_custom_object,
                        group,
                        POLICY_VERSION,
                        "rotationpolicies",
                    )
                )
        await asyncio.gather(*watches)

    async def _policies_served(
        self, custom: client.CustomObjectsApi, group: str = POLICY_GROUP
    ) -> bool:
        try:
            await custom.list_cluster_custom_object(
                group, POLICY_VERSION, "rotationpolicies", limit=1
            )
        except Exception:  # not installed (404) or not allowed: polling still sees policies
            return False
        return True

    async def _watch(
        self,
        what: str,
        edges: EdgeFilter,
        list_fn: Callable[..., Any],
        *args: Any,
        **kwargs: Any,
    ) -> None:
        while True:
            events = watch_events(list_fn, *args, timeout_seconds=self.stream_seconds, **kwargs)
            try:
                async with contextlib.aclosing(events):  # the connection goes back at once
                    async for kind, obj in events:
                        wake, pool = edges.changed(kind, obj)
                        if wake:
                            self.poke(pool)
                continue  # the server ended the stream (its timeout): open the next one
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the stream failed: polling covers the gap; retry soon
                _log.warning("watch of %s failed: %s; retrying", what, exc)
            await asyncio.sleep(self.retry_seconds)


async def watch_events(
    list_fn: Callable[..., Any], *args: Any, **kwargs: Any
) -> AsyncGenerator[tuple[str, Obj], None]:
    """(type, raw object) of each event of one watch stream of ``list_fn``, until it ends.

    An ``ERROR`` event (e.g. 410 Gone) raises ``ApiException`` with the status it carries.
    """
    response = await list_fn(*args, watch=True, _preload_content=False, **kwargs)
    try:
        while line := await response.content.readline():
            if not line.strip():
                continue  # a keep-alive blank line carries no event
            event = json.loads(line)
            obj = event.get("object") or {}
            if event.get("type") == "ERROR":
                raise ApiException(
                    status=obj.get("code"), reason=f"{obj.get('reason')}: {obj.get('message')}"
                )
            yield str(event.get("type")), obj
    finally:
        response.release()


def _name(obj: Obj) -> str | None:
    return (obj.get("metadata") or {}).get("name")
