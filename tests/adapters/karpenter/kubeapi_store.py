"""The local API server's object store: typed resources, resourceVersions, change history.

Every write bumps one cluster-wide ``resourceVersion`` and is recorded for watches; a write
carrying a stale ``resourceVersion`` is a 409 Conflict (counted in ``conflicts``), a delete of an
object with finalizers only sets its ``deletionTimestamp``. A bound Pod is deleted gracefully: it
stays, terminating, with ``deletionTimestamp`` = now + its grace period (``gracePeriodSeconds``,
else ``spec.terminationGracePeriodSeconds``, else 30 s) and goes once that passes; grace 0 or an
unbound Pod goes at once. ``compact()`` drops the change history, so a watch resuming from an
older ``resourceVersion`` gets 410 Gone. Generation, CRD defaults and the status rules are
``kubeapi_rules``. Tests seed and inspect objects through the same methods.

Every object is created under a name that is a DNS subdomain (RFC 1123: lower-case letters,
digits, ``-`` and ``.``, starting and ending with a letter or digit, at most 253 characters), as
the API server validates every kind served here (apimachinery ``pkg/util/validation``,
``IsDNS1123Subdomain``; ``metadata.name`` through ``ValidateObjectMeta``); anything else is a 422
naming ``metadata.name``.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from tests.adapters.karpenter.kubeapi_eviction import (
    budget_status,
    check_eviction,
    check_eviction_name,
)
from tests.adapters.karpenter.kubeapi_rules import on_create, on_update
from tests.adapters.karpenter.kubeapi_schema import Schema, admit, crd_schema
from tests.adapters.karpenter.kubeapi_semantics import (
    KubeError,
    matches,
    parse_field_selector,
    parse_label_selector,
)

Obj = dict[str, Any]


@dataclass(frozen=True)
class Resource:
    """One served resource type."""

    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    #: The CRD's structural schema: writes are pruned, defaulted and validated by it.
    schema: Schema | None = field(default=None, compare=False, hash=False, repr=False)

    @property
    def api_version(self) -> str:
        """``v1`` for core, ``group/version`` otherwise."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """``nodeclaims.karpenter.sh`` (or just ``pods`` for core), as error messages name it."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def qualified_kind(self) -> str:
        """``RotationPolicy.fleetgate.io``, as an invalid object's message names its kind."""
        return f"{self.kind}.{self.group}" if self.group else self.kind


DEFAULT_RESOURCES = (
    Resource("", "v1", "nodes", "Node", namespaced=False),
    Resource("", "v1", "pods", "Pod", namespaced=True),
    Resource("", "v1", "events", "Event", namespaced=True),
    Resource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True),
    Resource("events.k8s.io", "v1", "events", "Event", namespaced=True),
    Resource("karpenter.sh", "v1", "nodepools", "NodePool", namespaced=False),
    Resource("karpenter.sh", "v1", "nodeclaims", "NodeClaim", namespaced=False),
    Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", namespaced=True),
)


_DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = _DNS1123_LABEL + "(\\." + _DNS1123_LABEL + ")*"
DNS_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
    f"used for validation is '{_DNS1123_SUBDOMAIN}')"
)


def name_problems(name: str) -> list[str]:
    """Why ``name`` is no DNS subdomain, as the API server words it (empty: it is one)."""
    problems = []
    if len(name) > 253:
        problems.append("must be no more than 253 characters")
    if not re.fullmatch(_DNS1123_SUBDOMAIN, name):
        problems.append(DNS_SUBDOMAIN_MESSAGE)
    return problems


#: The chart's CRDs, which the local server serves with their schemas (see ``crd_resource``).
CHART_CRDS = Path(__file__).resolve().parents[3] / "deploy" / "helm" / "fleetgate" / "crds"


def crd_resource(path: Path) -> Resource:
    """The resource the CRD in ``path`` defines, served with its first served version's schema."""
    spec = yaml.safe_load(path.read_text())["spec"]
    version = next(v["name"] for v in spec["versions"] if v.get("served", True))
    names = spec["names"]
    return Resource(
        spec["group"],
        version,
        names["plural"],
        names["kind"],
        namespaced=spec["scope"] == "Namespaced",
        schema=crd_schema(path, version),
    )


def chart_crd(filename: str) -> Resource:
    """The resource of one of the chart's CRDs, by file name (``rotationpolicies.fleetgate.io``)."""
    return crd_resource(CHART_CRDS / f"{filename}.yaml")


def parse_quantity_units(value: str) -> int:
    """A plain or milli quantity (``"3920m"``, ``"4"``) in milli-units (for the test's counts)."""
    return int(value[:-1]) if value.endswith("m") else int(float(value) * 1000)


def rfc3339(at: datetime) -> str:
    """Kubernetes ``Time``: RFC3339 at second precision in UTC."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class ObjectStore:
    """In-memory objects of the served resources."""

    resources: tuple[Resource, ...] = DEFAULT_RESOURCES
    now: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))

    def __post_init__(self) -> None:
        self._objects: dict[tuple[Resource, str, str], Obj] = {}
        self._rv = 1000
        self._history: list[tuple[int, Resource, str, Obj, Obj | None]] = []
        self._last: dict[tuple[Resource, str, str], Obj] = {}  # each object's last written state
        self._refreshing = False  # writing budget statuses (which must not trigger another)
        self._changed = asyncio.Event()  # replaced after each set: a fresh one per change
        self._compacted = 0  # resourceVersions up to this one are no longer in the history
        self.conflicts = 0  # writes answered 409 for a stale resourceVersion

    def resource(self, name: str) -> Resource:
        """The resource by kind (``NodePool``), plural (``nodepools``) or ``plural.group``."""
        # Two "events" exist; a bare name means the modern events.k8s.io one, so it goes first.
        ordered = sorted(self.resources, key=lambda r: r.group != "events.k8s.io")
        for res in ordered:
            if name in (res.kind, res.plural, res.qualified):
                return res
        raise KeyError(f"no served resource named {name!r}")

    def unserve(self, group: str, version: str) -> None:
        """Stop serving ``group/version`` (discovery and every path under it)."""
        self.resources = tuple(
            r for r in self.resources if (r.group, r.version) != (group, version)
        )

    def seed(self, obj: Obj) -> Obj:
        """Store ``obj`` as if created through the API (``creationTimestamp`` may be preset)."""
        res = next(
            (
                r
                for r in self.resources
                if (r.api_version, r.kind) == (obj.get("apiVersion"), obj["kind"])
            ),
            None,
        ) or self.resource(obj["kind"])
        return copy.deepcopy(self._create(res, obj["metadata"].get("namespace", ""), obj))

    def get(self, kind: str, name: str, namespace: str = "") -> Obj | None:
        """A copy of the stored object, or None."""
        found = self._objects.get((self.resource(kind), namespace, name))
        return copy.deepcopy(found) if found is not None else None

    def list(self, kind: str, namespace: str | None = None) -> list[Obj]:
        """Copies of every stored object of ``kind`` (in ``namespace`` if given), by name."""
        res = self.resource(kind)
        return [
            copy.deepcopy(o)
            for (r, ns, _), o in sorted(self._objects.items(), key=lambda kv: kv[0][1:])
            if r == res and (namespace is None or ns == namespace)
        ]

    def modify(
        self, kind: str, name: str, change: Callable[[Obj], None], namespace: str = ""
    ) -> Obj:
        """Apply ``change`` to the stored object in place, bumping its resourceVersion."""
        res = self.resource(kind)
        obj = self._objects[(res, namespace, name)]
        before = copy.deepcopy(obj.get("spec"))
        change(obj)
        if obj.get("spec") != before:
            obj["metadata"]["generation"] = int(obj["metadata"].get("generation") or 1) + 1
        self._bump(res, obj, "MODIFIED")
        return copy.deepcopy(obj)

    def delete(self, kind: str, name: str, namespace: str = "", options: Obj | None = None) -> None:
        """Delete as a client's DELETE with ``options`` (DeleteOptions: ``gracePeriodSeconds``,
        ``preconditions``) does: finalizers wait; a bound Pod terminates."""
        self._delete(self.resource(kind), namespace, name, options)

    def compact(self) -> None:
        """Forget the change history (etcd compaction): older resourceVersions now answer 410."""
        self._compacted = self._rv
        self._history.clear()

    @property
    def resource_version(self) -> int:
        """The latest resourceVersion written (etcd's current revision)."""
        return self._rv

    @property
    def compacted(self) -> int:
        """The revision of the last compaction: the state at any earlier one is gone."""
        return self._compacted

    def objects_at(self, res: Resource, revision: int) -> list[Obj]:
        """Copies of ``res``'s objects as they were at ``revision`` (no earlier than the last
        compaction, no later than now), ordered by namespace and name as a list is."""
        state = {key: obj for key, obj in self._objects.items() if key[0] == res}
        for rv, kind, change, now, before in reversed(self._history):
            if rv <= revision:
                break
            if kind != res:
                continue
            key = (kind, now["metadata"].get("namespace", ""), now["metadata"]["name"])
            if change == "ADDED" or before is None:
                state.pop(key, None)
            else:
                state[key] = before
        return [copy.deepcopy(o) for k, o in sorted(state.items(), key=lambda kv: kv[0][1:])]

    def reap(self) -> None:
        """Remove the terminating Pods whose grace period has passed (the kubelet's part)."""
        now = self.now()
        for (res, ns, name), obj in list(self._objects.items()):
            meta = obj["metadata"]
            at = meta.get("deletionTimestamp")
            if (
                res.kind == "Pod"
                and at
                and not meta.get("finalizers")
                and datetime.fromisoformat(at.replace("Z", "+00:00")) <= now
            ):
                del self._objects[(res, ns, name)]
                self._bump(res, obj, "DELETED")

    def remove(self, kind: str, name: str, namespace: str = "") -> None:
        """Remove the object outright (what finalizers ending does)."""
        res = self.resource(kind)
        obj = self._objects.pop((res, namespace, name))
        self._bump(res, obj, "DELETED")

    # --- storage -----------------------------------------------------------------------------

    def _bump(self, res: Resource, obj: Obj, change: str) -> None:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        meta = obj["metadata"]
        key = (res, meta.get("namespace", ""), meta["name"])
        # The state before this change rides along, so a watch with a selector can tell an object
        # that stopped (or started) matching, as the real server's watch cache does.
        before = self._last.pop(key, None) if change == "DELETED" else self._last.get(key)
        now = copy.deepcopy(obj)
        if change != "DELETED":
            self._last[key] = now
        self._history.append((self._rv, res, change, now, before))
        self._wake()
        if res.kind in ("Pod", "PodDisruptionBudget") and not self._refreshing:
            self._refresh_budgets(key[1])

    def _refresh_budgets(self, namespace: str) -> None:
        """Write each budget's status as the disruption controller would, where it changed."""
        budgets = [
            (k, o)
            for k, o in self._objects.items()
            if k[0].kind == "PodDisruptionBudget" and k[1] == namespace
        ]
        if not budgets:
            return
        pods = [o for k, o in self._objects.items() if k[0].kind == "Pod" and k[1] == namespace]
        self._refreshing = True
        try:
            for (res, _ns, _name), budget in budgets:
                status = budget_status(budget, pods)
                if budget.get("status") != status:
                    budget["status"] = status
                    self._bump(res, budget, "MODIFIED")
        finally:
            self._refreshing = False

    def evict(self, namespace: str, name: str, body: Obj | None) -> Obj:
        """``POST pods/<name>/eviction`` with the Eviction ``body``: delete the Pod as a DELETE
        with its ``deleteOptions`` would, unless the real server's checks refuse first (see
        ``kubeapi_eviction``); the Pod as it is left."""
        check_eviction_name(name, body)
        res = self.resource("Pod")
        pod = self._existing(res, namespace, name)
        budgets = [
            o
            for k, o in self._objects.items()
            if k[0].kind == "PodDisruptionBudget" and k[1] == namespace
        ]
        pods = [o for k, o in self._objects.items() if k[0].kind == "Pod" and k[1] == namespace]
        check_eviction(pod, budgets, pods)
        options = (body or {}).get("deleteOptions") or None
        return copy.deepcopy(self._delete(res, namespace, name, options))

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _create(self, res: Resource, namespace: str, body: Obj, via_api: bool = False) -> Obj:
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        name = meta.get("name")
        if not name:
            raise KubeError(422, "Invalid", f"{res.kind} is invalid: metadata.name: Required value")
        problems = name_problems(str(name))
        if problems:
            shown = json.dumps(name, ensure_ascii=False)
            listed = "; ".join(problems)
            raise KubeError(
                422,
                "Invalid",
                f"{res.kind} {shown} is invalid: metadata.name: Invalid value: {shown}: {listed}",
            )
        if res.namespaced:
            meta["namespace"] = namespace
        if (res, namespace, name) in self._objects:
            raise KubeError(409, "AlreadyExists", f'{res.qualified} "{name}" already exists')
        obj["apiVersion"], obj["kind"] = res.api_version, res.kind
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", rfc3339(self.now()))
        meta.pop("deletionTimestamp", None)
        on_create(res.kind, obj, via_api=via_api)
        if res.schema is not None:
            obj = admit(res.schema, obj, kind=res.qualified_kind, name=name)
        self._objects[(res, namespace, name)] = obj
        self._bump(res, obj, "ADDED")
        return obj

    def _existing(self, res: Resource, namespace: str, name: str) -> Obj:
        obj = self._objects.get((res, namespace, name))
        if obj is None:
            raise KubeError(404, "NotFound", f'{res.qualified} "{name}" not found')
        return obj

    def _store(
        self,
        res: Resource,
        namespace: str,
        name: str,
        new: Obj,
        sent_rv: str | None,
        subresource: str | None = None,
    ) -> Obj:
        current = self._existing(res, namespace, name)
        if sent_rv and sent_rv != current["metadata"]["resourceVersion"]:
            self.conflicts += 1
            raise KubeError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {res.qualified} "{name}": the object has been '
                "modified; please apply your changes to the latest version and try again",
            )
        on_update(res.kind, current, new, subresource)
        if res.schema is not None:
            new = admit(res.schema, new, kind=res.qualified_kind, name=name, old=current)
        # Identity and server-owned fields cannot be changed by a client.
        for key in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "namespace",
            "name",
        ):
            if key in current["metadata"]:
                new["metadata"][key] = current["metadata"][key]
            else:
                new["metadata"].pop(key, None)
        new["apiVersion"], new["kind"] = res.api_version, res.kind
        self._objects[(res, namespace, name)] = new
        if current.get("metadata", {}).get("deletionTimestamp") and not new["metadata"].get(
            "finalizers"
        ):
            del self._objects[(res, namespace, name)]
            self._bump(res, new, "DELETED")
        else:
            self._bump(res, new, "MODIFIED")
        return new

    def _delete(
        self,
        res: Resource,
        namespace: str,
        name: str,
        options: Obj | None,
        grace_seconds: int | None = None,
    ) -> Obj:
        obj = self._existing(res, namespace, name)
        pre = (options or {}).get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != obj["metadata"]["uid"]:
            raise KubeError(
                409,
                "Conflict",
                f"Precondition failed: UID in precondition: {pre['uid']}, "
                f"UID in object meta: {obj['metadata']['uid']}",
            )
        if (
            pre.get("resourceVersion")
            and pre["resourceVersion"] != obj["metadata"]["resourceVersion"]
        ):
            raise KubeError(409, "Conflict", "Precondition failed: resourceVersion")
        if res.kind == "Pod" and not obj["metadata"].get("deletionTimestamp"):
            grace = (options or {}).get("gracePeriodSeconds", grace_seconds)
            if grace is None:
                grace = (obj.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
            if int(grace) > 0 and (obj.get("spec") or {}).get("nodeName"):
                # Bound: the kubelet stops it within its grace period; until then it is there.
                at = self.now() + timedelta(seconds=int(grace))
                obj["metadata"]["deletionTimestamp"] = rfc3339(at)
                obj["metadata"]["deletionGracePeriodSeconds"] = int(grace)
                self._bump(res, obj, "MODIFIED")
                return obj
        if obj["metadata"].get("finalizers"):
            if not obj["metadata"].get("deletionTimestamp"):
                obj["metadata"]["deletionTimestamp"] = rfc3339(self.now())
                self._bump(res, obj, "MODIFIED")
            return obj
        del self._objects[(res, namespace, name)]
        self._bump(res, obj, "DELETED")
        return obj

    def select(
        self,
        res: Resource,
        namespace: str | None,
        query: dict[str, str],
        objects: list[Obj] | None = None,
    ) -> list[Obj]:
        """``res``'s objects (now, or the given ``objects``) in ``namespace`` that the query's
        label and field selectors match."""
        labels = parse_label_selector(query.get("labelSelector", ""))
        fields = parse_field_selector(query.get("fieldSelector", ""))
        if objects is None:
            ordered = sorted(self._objects.items(), key=lambda kv: kv[0][1:])
            objects = [o for (r, _ns, _n), o in ordered if r == res]
        return [
            obj
            for obj in objects
            if (namespace is None or obj["metadata"].get("namespace", "") == namespace)
            and matches(obj, labels, fields)
        ]
