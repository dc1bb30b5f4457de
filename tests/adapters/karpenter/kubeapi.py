"""A local Kubernetes API server for the Karpenter gateway's tests (test support, not a mock).

It serves, over real HTTP on 127.0.0.1, the subset of the Kubernetes API the gateway speaks:
discovery (``/api``, ``/apis``, ``/apis/<group>/<version>``), get, list (label and field
selectors, ``limit``/``continue``), watch (``?watch=true`` as a JSON-lines stream), create,
replace (``PUT``), JSON merge patch and JSON patch, delete (finalizers turn a delete into a
``deletionTimestamp``), ``resourceVersion`` bookkeeping with ``409 Conflict`` on a stale write
(also for a merge patch that carries ``metadata.resourceVersion``, as the real server does),
``404``, ``403`` for verbs a test forbids, and one-shot injected failures.

Every request is recorded (method, path, query, body, content type) so tests can assert exactly
what went over the wire. Strategic merge patch is refused with 415 on purpose: the gateway must
always say which patch it sends.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import re
import socket
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

Obj = dict[str, Any]


@dataclass(frozen=True)
class Resource:
    """One served resource type."""

    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        """``v1`` for core, ``group/version`` otherwise."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """``nodeclaims.karpenter.sh`` (or just ``pods`` for core), as error messages name it."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


DEFAULT_RESOURCES = (
    Resource("", "v1", "nodes", "Node", namespaced=False),
    Resource("", "v1", "pods", "Pod", namespaced=True),
    Resource("", "v1", "events", "Event", namespaced=True),
    Resource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True),
    Resource("events.k8s.io", "v1", "events", "Event", namespaced=True),
    Resource("karpenter.sh", "v1", "nodepools", "NodePool", namespaced=False),
    Resource("karpenter.sh", "v1", "nodeclaims", "NodeClaim", namespaced=False),
)


@dataclass(frozen=True)
class Request:
    """One request as the server received it."""

    method: str
    path: str
    query: dict[str, str]
    body: Any
    content_type: str | None
    token: str | None = None  # the bearer token: tells one client (replica) from another


@dataclass
class _Fault:
    method: str
    path: re.Pattern[str]
    status: int
    times: int
    token: str | None
    seconds: float = 0.0


class KubeError(Exception):
    """An API error answered as a ``Status`` object."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


def rfc3339(at: datetime) -> str:
    """Kubernetes ``Time``: RFC3339 at second precision in UTC."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class KubeAPIServer:
    """In-memory objects served over HTTP. Use as ``async with KubeAPIServer() as api``."""

    resources: tuple[Resource, ...] = DEFAULT_RESOURCES
    now: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    requests: list[Request] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._objects: dict[tuple[Resource, str, str], Obj] = {}
        self._rv = 1000
        self._history: list[tuple[int, Resource, str, Obj]] = []
        self._changed = asyncio.Event()  # replaced after each set: a fresh one per change
        self._faults: list[_Fault] = []
        self._stalls: list[_Fault] = []
        self._forbidden: set[tuple[str, str]] = set()
        self._runner: web.AppRunner | None = None
        self._closing = False
        self.port = 0

    # --- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> KubeAPIServer:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._closing = True
        self._wake()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def url(self) -> str:
        """The base URL clients connect to."""
        return f"http://127.0.0.1:{self.port}"

    def kubeconfig(self, token: str = "test-token") -> str:
        """A kubeconfig (YAML-compatible JSON) pointing at this server with a bearer token."""
        return json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "local", "cluster": {"server": self.url}}],
                "users": [{"name": "tester", "user": {"token": token}}],
                "contexts": [{"name": "local", "context": {"cluster": "local", "user": "tester"}}],
                "current-context": "local",
            }
        )

    # --- test controls -----------------------------------------------------------------------

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

    def forbid(self, verb: str, resource: str) -> None:
        """Answer 403 to ``verb`` (get/list/watch/create/update/patch/delete) on ``resource``."""
        self._forbidden.add((verb, resource))

    def fail_next(
        self, method: str, path_regex: str, status: int, times: int = 1, token: str | None = None
    ) -> None:
        """Answer the next ``times`` matching requests (``method`` "*": any) of the client with
        ``token`` (if given) with ``status`` (409 is a Conflict)."""
        self._faults.append(_Fault(method.upper(), re.compile(path_regex), status, times, token))

    def stall_next(self, method: str, path_regex: str, seconds: float, times: int = 1) -> None:
        """Hold the next ``times`` matching requests for ``seconds`` before answering them."""
        self._stalls.append(_Fault(method.upper(), re.compile(path_regex), 0, times, None, seconds))

    def heal(self) -> None:
        """Drop every injected failure that has not fired yet."""
        self._faults.clear()
        self._stalls.clear()

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
        change(obj)
        self._bump(res, obj, "MODIFIED")
        return copy.deepcopy(obj)

    def remove(self, kind: str, name: str, namespace: str = "") -> None:
        """Remove the object outright (what finalizers ending does)."""
        res = self.resource(kind)
        obj = self._objects.pop((res, namespace, name))
        self._bump(res, obj, "DELETED")

    def writes(self) -> list[Request]:
        """Every request that was not a read."""
        return [r for r in self.requests if r.method not in ("GET", "HEAD")]

    # --- storage -----------------------------------------------------------------------------

    def _bump(self, res: Resource, obj: Obj, change: str) -> None:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        self._history.append((self._rv, res, change, copy.deepcopy(obj)))
        self._wake()

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _create(self, res: Resource, namespace: str, body: Obj) -> Obj:
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        name = meta.get("name")
        if not name:
            raise KubeError(422, "Invalid", f"{res.kind} is invalid: metadata.name: Required value")
        if res.namespaced:
            meta["namespace"] = namespace
        if (res, namespace, name) in self._objects:
            raise KubeError(409, "AlreadyExists", f'{res.qualified} "{name}" already exists')
        obj["apiVersion"], obj["kind"] = res.api_version, res.kind
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", rfc3339(self.now()))
        meta.pop("deletionTimestamp", None)
        self._objects[(res, namespace, name)] = obj
        self._bump(res, obj, "ADDED")
        return obj

    def _existing(self, res: Resource, namespace: str, name: str) -> Obj:
        obj = self._objects.get((res, namespace, name))
        if obj is None:
            raise KubeError(404, "NotFound", f'{res.qualified} "{name}" not found')
        return obj

    def _store(
        self, res: Resource, namespace: str, name: str, new: Obj, sent_rv: str | None
    ) -> Obj:
        current = self._existing(res, namespace, name)
        if sent_rv and sent_rv != current["metadata"]["resourceVersion"]:
            raise KubeError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {res.qualified} "{name}": the object has been '
                "modified; please apply your changes to the latest version and try again",
            )
        # Identity and server-owned fields cannot be changed by a client.
        for key in ("uid", "creationTimestamp", "deletionTimestamp", "namespace", "name"):
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

    def _delete(self, res: Resource, namespace: str, name: str, options: Obj | None) -> Obj:
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
        if obj["metadata"].get("finalizers"):
            if not obj["metadata"].get("deletionTimestamp"):
                obj["metadata"]["deletionTimestamp"] = rfc3339(self.now())
                self._bump(res, obj, "MODIFIED")
            return obj
        del self._objects[(res, namespace, name)]
        self._bump(res, obj, "DELETED")
        return obj

    def _select(self, res: Resource, namespace: str | None, query: dict[str, str]) -> list[Obj]:
        labels = _parse_label_selector(query.get("labelSelector", ""))
        fields = _parse_field_selector(query.get("fieldSelector", ""))
        out = []
        for (r, ns, _name), obj in sorted(self._objects.items(), key=lambda kv: kv[0][1:]):
            if r != res or (namespace is not None and ns != namespace):
                continue
            if _matches(obj, labels, fields):
                out.append(obj)
        return out

    # --- HTTP --------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                return _status(400, "BadRequest", "request body is not JSON")
        query = dict(request.query)
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None
        self.requests.append(
            Request(request.method, request.path, query, body, request.content_type or None, token)
        )
        for stall in self._stalls:
            if (
                stall.times > 0
                and stall.method in (request.method, "*")
                and stall.path.search(request.path)
            ):
                stall.times -= 1
                await asyncio.sleep(stall.seconds)
        try:
            self._maybe_fault(request.method, request.path, token)
            return await self._route(request, query, body)
        except KubeError as exc:
            return _status(exc.code, exc.reason, exc.message)

    def _maybe_fault(self, method: str, path: str, token: str | None) -> None:
        for fault in self._faults:
            if fault.token is not None and fault.token != token:
                continue
            if fault.times > 0 and fault.method in (method, "*") and fault.path.search(path):
                fault.times -= 1
                reason = {409: "Conflict", 404: "NotFound", 403: "Forbidden"}.get(
                    fault.status, "InternalError"
                )
                raise KubeError(
                    fault.status, reason, f"injected {fault.status} for {method} {path}"
                )

    async def _route(
        self, request: web.Request, query: dict[str, str], body: Any
    ) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        if parts == ["api"]:
            return web.json_response({"kind": "APIVersions", "versions": ["v1"]})
        if parts == ["apis"]:
            return web.json_response(self._group_list())
        if len(parts) == 2 and parts[0] == "apis":
            group = next((g for g in self._group_list()["groups"] if g["name"] == parts[1]), None)
            if group is None:
                raise KubeError(404, "NotFound", "the server could not find the requested resource")
            return web.json_response({"kind": "APIGroup", "apiVersion": "v1", **group})
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise KubeError(404, "NotFound", "the server could not find the requested resource")
        served = [r for r in self.resources if (r.group, r.version) == (group, version)]
        if not served:
            raise KubeError(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            return web.json_response(_resource_list(group, version, served))
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        res = next((r for r in served if r.plural == rest[0]), None)
        if res is None or len(rest) > 2 or (namespace is not None and not res.namespaced):
            raise KubeError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) == 2 else None
        return await self._verb(request, res, namespace, name, query, body)

    async def _verb(
        self,
        request: web.Request,
        res: Resource,
        namespace: str | None,
        name: str | None,
        query: dict[str, str],
        body: Any,
    ) -> web.StreamResponse:
        method = request.method
        watching = query.get("watch", "").lower() in ("true", "1")
        verb = {
            ("GET", True): "get",
            ("GET", False): "watch" if watching else "list",
            ("POST", False): "create",
            ("PUT", True): "update",
            ("PATCH", True): "patch",
            ("DELETE", True): "delete",
        }.get((method, name is not None))
        if verb is None:
            raise KubeError(405, "MethodNotAllowed", f"{method} is not supported here")
        if (verb, res.plural) in self._forbidden:
            scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
            raise KubeError(
                403,
                "Forbidden",
                f'{res.qualified} is forbidden: User "system:serviceaccount:test:fleetgate" cannot '
                f'{verb} resource "{res.plural}" in API group "{res.group}" {scope}',
            )
        if res.namespaced and namespace is None and verb not in ("list", "watch"):
            raise KubeError(404, "NotFound", "the server could not find the requested resource")
        ns = namespace or ""
        if verb == "list":
            return web.json_response(self._list_response(res, namespace, query))
        if verb == "watch":
            return await self._watch(request, res, namespace, query)
        if verb == "create":
            if not isinstance(body, dict):
                raise KubeError(400, "BadRequest", "create needs an object body")
            return web.json_response(self._create(res, ns, body), status=201)
        assert name is not None
        if verb == "get":
            return web.json_response(self._existing(res, ns, name))
        if verb == "update":
            if not isinstance(body, dict):
                raise KubeError(400, "BadRequest", "update needs an object body")
            sent_rv = body.get("metadata", {}).get("resourceVersion")
            if not sent_rv:
                raise KubeError(
                    422,
                    "Invalid",
                    f'{res.kind} "{name}" is invalid: metadata.resourceVersion: Invalid value: '
                    "0x0: must be specified for an update",
                )
            return web.json_response(self._store(res, ns, name, copy.deepcopy(body), sent_rv))
        if verb == "patch":
            current = copy.deepcopy(self._existing(res, ns, name))
            ctype = request.content_type
            if ctype == "application/merge-patch+json":
                if not isinstance(body, dict):
                    raise KubeError(400, "BadRequest", "a merge patch must be an object")
                patched = merge_patch(current, body)
                sent_rv = (body.get("metadata") or {}).get("resourceVersion")
            elif ctype == "application/json-patch+json":
                patched, sent_rv = json_patch(current, body), None
            else:
                raise KubeError(
                    415,
                    "UnsupportedMediaType",
                    f"the body of the request was in an "
                    f"unknown format - accepted media types include: "
                    f"application/json-patch+json, application/merge-patch+json "
                    f"(got {ctype})",
                )
            return web.json_response(self._store(res, ns, name, patched, sent_rv))
        return web.json_response(self._delete(res, ns, name, body))

    def _list_response(self, res: Resource, namespace: str | None, query: dict[str, str]) -> Obj:
        items = self._select(res, namespace, query)
        start = int(query.get("continue") or 0)
        limit = int(query.get("limit") or 0)
        page = items[start : start + limit] if limit else items[start:]
        meta: Obj = {"resourceVersion": str(self._rv)}
        if limit and start + limit < len(items):
            meta["continue"] = str(start + limit)
        return {
            "kind": f"{res.kind}List",
            "apiVersion": res.api_version,
            "metadata": meta,
            "items": page,
        }

    async def _watch(
        self, request: web.Request, res: Resource, namespace: str | None, query: dict[str, str]
    ) -> web.StreamResponse:
        labels = _parse_label_selector(query.get("labelSelector", ""))
        fields = _parse_field_selector(query.get("fieldSelector", ""))
        since = int(query.get("resourceVersion") or self._rv)
        deadline = asyncio.get_running_loop().time() + float(query.get("timeoutSeconds") or 30)
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        try:
            if not query.get("resourceVersion"):
                # "Get state and start at most recent": the current objects first, as ADDED.
                for obj in self._select(res, namespace, query):
                    await response.write(
                        (json.dumps({"type": "ADDED", "object": obj}) + "\n").encode()
                    )
            while not self._closing:
                for rv, r, change, obj in self._history:
                    if rv <= since or r != res:
                        continue
                    since = rv
                    ns = obj["metadata"].get("namespace", "")
                    if (namespace is None or ns == namespace) and _matches(obj, labels, fields):
                        line = json.dumps({"type": change, "object": obj}) + "\n"
                        await response.write(line.encode())
                remaining = deadline - asyncio.get_running_loop().time()
                if remaining <= 0:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), timeout=remaining)
            await response.write_eof()
        except ConnectionResetError:
            pass  # the client stopped watching: nothing to finish
        return response

    def _group_list(self) -> Obj:
        groups: dict[str, list[str]] = {}
        for r in self.resources:
            if r.group:
                versions = groups.setdefault(r.group, [])
                if r.version not in versions:
                    versions.append(r.version)
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [
                {
                    "name": g,
                    "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                    "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]},
                }
                for g, vs in groups.items()
            ],
        }


# --- helpers ------------------------------------------------------------------------------------


def _status(code: int, reason: str, message: str) -> web.Response:
    return web.json_response(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        },
        status=code,
    )


def _resource_list(group: str, version: str, served: list[Resource]) -> Obj:
    verbs = ["create", "delete", "get", "list", "patch", "update", "watch"]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": [
            {
                "name": r.plural,
                "singularName": r.kind.lower(),
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": verbs,
            }
            for r in served
        ],
    }


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge recursively, ``null`` deletes, the rest replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(target: Obj, ops: Any) -> Obj:
    """RFC 6902 JSON patch (add, remove, replace, test) on a copy of ``target``."""
    if not isinstance(ops, list):
        raise KubeError(400, "BadRequest", "a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in ops:
        *parents, last = [
            p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]
        ]
        node: Any = doc
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        key: Any = int(last) if isinstance(node, list) and last != "-" else last
        kind = op["op"]
        if kind == "test" and node.get(key) != op["value"]:
            raise KubeError(422, "Invalid", f"test operation failed at {op['path']}")
        if kind == "remove":
            if key not in node:
                raise KubeError(422, "Invalid", f"remove of missing path {op['path']}")
            del node[key]
        elif kind in ("add", "replace"):
            if isinstance(node, list):
                node.insert(len(node) if key == "-" else key, op["value"])
            else:
                node[key] = op["value"]
    return doc


_SELECTOR_TERM = re.compile(
    r"^\s*(!?)([\w./-]+)\s*(?:(==|=|!=)\s*([\w./-]*)|\s+(in|notin)\s*\(([^)]*)\))?\s*$"
)


def _split_terms(selector: str) -> Iterator[str]:
    depth, term = 0, ""
    for ch in selector:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            yield term
            term = ""
        else:
            term += ch
    if term.strip():
        yield term


def _parse_label_selector(selector: str) -> list[tuple[str, str, set[str]]]:
    terms = []
    for raw in _split_terms(selector):
        m = _SELECTOR_TERM.match(raw)
        if m is None:
            raise KubeError(400, "BadRequest", f"unable to parse requirement: {raw!r}")
        neg, key, eq, value, setop, values = m.groups()
        if neg:
            terms.append((key, "!", set()))
        elif eq:
            terms.append((key, "!=" if eq == "!=" else "=", {value}))
        elif setop:
            terms.append((key, setop, {v.strip() for v in values.split(",") if v.strip()}))
        else:
            terms.append((key, "exists", set()))
    return terms


def _parse_field_selector(selector: str) -> list[tuple[str, str, str]]:
    out = []
    for raw in _split_terms(selector):
        m = re.match(r"^\s*([\w.]+)\s*(==|=|!=)\s*(.*?)\s*$", raw)
        if m is None:
            raise KubeError(400, "BadRequest", f"invalid field selector: {raw!r}")
        out.append((m.group(1), "!=" if m.group(2) == "!=" else "=", m.group(3)))
    return out


def _matches(
    obj: Obj, labels: list[tuple[str, str, set[str]]], fields: list[tuple[str, str, str]]
) -> bool:
    have = obj.get("metadata", {}).get("labels") or {}
    for key, op, values in labels:
        present = key in have
        ok = {
            "exists": present,
            "!": not present,
            "=": present and have[key] in values,
            "!=": not present or have[key] not in values,
            "in": present and have[key] in values,
            "notin": not present or have[key] not in values,
        }[op]
        if not ok:
            return False
    for path, op, value in fields:
        node: Any = obj
        for part in path.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        actual = "" if node is None else str(node)
        if (actual == value) != (op == "="):
            return False
    return True
