"""Rotation events as Kubernetes Events (``events.k8s.io/v1``), so ``kubectl describe nodepool``
shows why a pool is or is not rotating.

An ``Event`` whose ``data["object"]`` (the controller's ``Announce.subject_kind``) names a
Karpenter object (``NodePool``, ``NodeClaim``) or a ``Node`` becomes one Kubernetes Event
*regarding* that object; any other event (the capacity ledger's, say) is not a Kubernetes matter
and is skipped. ``data["action"]`` is the Event's ``action`` and ``data["related"]`` (kind and
name) its ``related`` object, as the controller gives them per reason (node-rotation-controller's
own choices, so tooling written for its Events keeps matching). The events live in the
``default`` namespace, as client-go records events about cluster-scoped objects. Delivery is
best-effort: a failure is logged, never raised (the ``EventSink`` contract). De-duplication is
the controller's job (spec 8.2: once per transition), not this sink's.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from fleetgate.adapters.karpenter.connection import KARPENTER_GROUP, KARPENTER_VERSION
from fleetgate.domain.events import Event, Level

REPORTING_CONTROLLER = "fleetgate.io/rotation-controller"
EVENT_NAMESPACE = "default"
NOTE_LIMIT = 1024  # the API server rejects a longer note
_REGARDING = {
    "NodePool": (f"{KARPENTER_GROUP}/{KARPENTER_VERSION}", "nodepools"),
    "NodeClaim": (f"{KARPENTER_GROUP}/{KARPENTER_VERSION}", "nodeclaims"),
    "Node": ("v1", "nodes"),
}
_log = logging.getLogger(__name__)


def event_body(
    event: Event,
    *,
    instance: str,
    serial: int,
    uid: str | None,
    related_uid: str | None = None,
) -> dict[str, Any] | None:
    """The ``events.k8s.io/v1`` Event for ``event``, or None when it regards no cluster object."""
    kind = str(event.data.get("object") or "")
    if kind not in _REGARDING or not event.subject:
        return None
    nanos = int(event.at.timestamp()) * 10**9 + event.at.microsecond * 1000 + serial
    note = str(event.data.get("message") or event.kind)
    body: dict[str, Any] = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{event.subject}.{nanos:x}", "namespace": EVENT_NAMESPACE},
        "eventTime": event.at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "reportingController": REPORTING_CONTROLLER,
        "reportingInstance": instance,
        # Required by the API server for a new Event; the reason stands in if none was given.
        "action": str(event.data.get("action") or event.kind)[:128],
        "reason": event.kind[:128],
        "note": note if len(note) <= NOTE_LIMIT else note[: NOTE_LIMIT - 3] + "...",
        "type": "Normal" if event.level == Level.INFO else "Warning",
        "regarding": _reference(kind, event.subject, uid),
    }
    related = _related(event)
    if related is not None:
        body["related"] = _reference(*related, related_uid)
    return body


def _reference(kind: str, name: str, uid: str | None) -> dict[str, Any]:
    """An ``ObjectReference`` to a cluster-scoped object (with its uid when it still exists)."""
    reference: dict[str, Any] = {"apiVersion": _REGARDING[kind][0], "kind": kind, "name": name}
    if uid:
        reference["uid"] = uid
    return reference


def _related(event: Event) -> tuple[str, str] | None:
    """The (kind, name) of the event's related object, when it names a cluster object."""
    related = event.data.get("related")
    if not isinstance(related, dict):
        return None
    kind, name = str(related.get("kind") or ""), str(related.get("name") or "")
    return (kind, name) if kind in _REGARDING and name else None


class KubernetesEventSink:
    """An ``EventSink`` writing Kubernetes Events through the gateway's API connection."""

    def __init__(
        self,
        api_client: Callable[[], Awaitable[client.ApiClient]],
        instance: str,
        timeout: float = 30.0,
    ) -> None:
        self._api_client = api_client
        self._instance = instance
        self._timeout = timeout  # bounds one event's requests: a hung call must not stall a pass
        self._serial = itertools.count()

    async def emit(self, events: Sequence[Event]) -> None:
        """Create one Kubernetes Event per event about a cluster object; never raises."""
        for event in events:
            try:
                async with asyncio.timeout(self._timeout):
                    await self._emit_one(event)
            except Exception:  # best-effort by contract: an Event must not break a rotation
                _log.warning(
                    "could not record Kubernetes event %s for %s",
                    event.kind,
                    event.subject,
                    exc_info=True,
                )

    async def _emit_one(self, event: Event) -> None:
        kind = str(event.data.get("object") or "")
        if kind not in _REGARDING:
            return
        api = await self._api_client()
        related = _related(event)
        body: Any = event_body(
            event,
            instance=self._instance,
            serial=next(self._serial) % 1000,
            uid=await self._uid(api, kind, event.subject),
            related_uid=None if related is None else await self._uid(api, *related),
        )
        if body is not None:
            await client.EventsV1Api(api).create_namespaced_event(EVENT_NAMESPACE, body)

    async def _uid(self, api: client.ApiClient, kind: str, name: str) -> str | None:
        """The object's uid, which ``kubectl describe`` matches on; None when it is gone."""
        _, plural = _REGARDING[kind]
        try:
            if kind == "Node":
                node = await client.CoreV1Api(api).read_node(name)
                return str(node.metadata.uid)
            found = await client.CustomObjectsApi(api).get_cluster_custom_object(
                KARPENTER_GROUP, KARPENTER_VERSION, plural, name
            )
            return str(found["metadata"]["uid"])
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
