"""A local Kubernetes API server for the Karpenter gateway's tests (test support, not a mock).

It serves, over real HTTP on 127.0.0.1, the subset of the Kubernetes API the gateway speaks:
discovery (``/api``, ``/apis``, ``/apis/<group>/<version>``), get, list (label and field
selectors, ``limit``/``continue``, ``resourceVersion``/``resourceVersionMatch`` with 410 and 504
as a real server answers them: ``kubeapi_lists``), watch (``?watch=true`` as a JSON-lines
stream), create,
replace (``PUT``), JSON merge patch and JSON patch, the ``status`` subresource, delete
(finalizers turn a delete into a ``deletionTimestamp``; a bound Pod terminates gracefully),
``resourceVersion`` bookkeeping with ``409 Conflict`` on a stale write (also for a merge patch
that carries ``metadata.resourceVersion``, as the real server does), ``410 Gone`` for a watch
resuming from a compacted version, ``generation``, CRD defaults and the status rules of
``kubeapi_rules``, ``404``, ``403`` for verbs a test forbids, and injected failures (an error
status, a stall, a dropped connection).

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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.adapters.karpenter.kubeapi_lists import list_response
from tests.adapters.karpenter.kubeapi_semantics import (
    KubeError,
    json_patch,
    matches,
    merge_patch,
    parse_field_selector,
    parse_label_selector,
)
from tests.adapters.karpenter.kubeapi_store import (
    DEFAULT_RESOURCES,
    Obj,
    ObjectStore,
    Resource,
    rfc3339,
)

__all__ = [
    "DEFAULT_RESOURCES",
    "KubeAPIServer",
    "KubeError",
    "Obj",
    "Request",
    "Resource",
    "rfc3339",
]


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


@dataclass
class KubeAPIServer(ObjectStore):
    """In-memory objects served over HTTP. Use as ``async with KubeAPIServer() as api``."""

    requests: list[Request] = field(default_factory=list)
    after_request: list[Callable[[Request], None]] = field(default_factory=list)
    """Called with each request once its answer is made (another writer acting just then)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._faults: list[_Fault] = []
        self._stalls: list[_Fault] = []
        self._drops: list[_Fault] = []
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

    def forbid(self, verb: str, resource: str) -> None:
        """Answer 403 to ``verb`` (get/list/watch/create/update/patch/delete) on ``resource``."""
        self._forbidden.add((verb, resource))

    def fail_next(
        self, method: str, path_regex: str, status: int, times: int = 1, token: str | None = None
    ) -> None:
        """Answer the next ``times`` matching requests (``method`` "*": any) of the client with
        ``token`` (if given) with ``status`` (409 is a Conflict)."""
        self._faults.append(_Fault(method.upper(), re.compile(path_regex), status, times, token))

    def stall_next(
        self,
        method: str,
        path_regex: str,
        seconds: float,
        times: int = 1,
        token: str | None = None,
    ) -> None:
        """Hold the next ``times`` matching requests (of the client with ``token``, if given)
        for ``seconds`` before answering them."""
        self._stalls.append(
            _Fault(method.upper(), re.compile(path_regex), 0, times, token, seconds)
        )

    def drop_next(
        self, method: str, path_regex: str, times: int = 1, token: str | None = None
    ) -> None:
        """Close the connection of the next ``times`` matching requests without an answer (the
        client sees the server disconnect)."""
        self._drops.append(_Fault(method.upper(), re.compile(path_regex), 0, times, token))

    def heal(self) -> None:
        """Drop every injected failure that has not fired yet."""
        self._faults.clear()
        self._stalls.clear()
        self._drops.clear()

    def writes(self) -> list[Request]:
        """Every request that was not a read."""
        return [r for r in self.requests if r.method not in ("GET", "HEAD")]

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
        record = Request(
            request.method, request.path, query, body, request.content_type or None, token
        )
        self.requests.append(record)
        for stall in self._stalls:
            if _fires(stall, request.method, request.path, token):
                await asyncio.sleep(stall.seconds)
        if any(_fires(drop, request.method, request.path, token) for drop in self._drops):
            assert request.transport is not None
            request.transport.close()  # no status line: the client sees a disconnect
            return web.Response()
        try:
            self._maybe_fault(request.method, request.path, token)
            self.reap()  # terminating Pods whose grace period has passed are gone by now
            answer = await self._route(request, query, body)
        except KubeError as exc:
            return _status(exc.code, exc.reason, exc.message, exc.list_continue)
        for hook in self.after_request:
            hook(record)
        return answer

    def _maybe_fault(self, method: str, path: str, token: str | None) -> None:
        for fault in self._faults:
            if _fires(fault, method, path, token):
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
        # ``<plural>/<name>/status``: the status subresource (every served kind has one here);
        # ``pods/<name>/eviction``: the Eviction API.
        status = len(rest) == 3 and rest[2] == "status"
        eviction = len(rest) == 3 and rest[2] == "eviction" and rest[0] == "pods"
        if (
            res is None
            or (len(rest) > 2 and not (status or eviction))
            or (namespace is not None and not res.namespaced)
        ):
            raise KubeError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) >= 2 else None
        if len(rest) == 3 and rest[2] == "eviction" and res.kind == "Pod":
            return self._eviction(request, namespace or "", rest[1], body)
        if status:
            return await self._status_verb(request, res, namespace or "", rest[1], body)
        return await self._verb(request, res, namespace, name, query, body)

    def _eviction(self, request: web.Request, ns: str, name: str, body: Any) -> web.StreamResponse:
        """``POST pods/<name>/eviction`` (policy/v1 Eviction): 201 with a Success status."""
        if request.method != "POST":
            raise KubeError(405, "MethodNotAllowed", f"{request.method} is not supported here")
        if ("create", "pods/eviction") in self._forbidden:
            raise KubeError(
                403,
                "Forbidden",
                'pods "eviction" is forbidden: cannot create resource "pods/eviction"',
            )
        self.evict(ns, name, body if isinstance(body, dict) else None)
        return web.json_response(
            {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}, status=201
        )

    async def _status_verb(
        self, request: web.Request, res: Resource, ns: str, name: str, body: Any
    ) -> web.StreamResponse:
        """GET, PUT or merge-PATCH the status subresource: only ``status`` changes, as on a real
        server (anything else in the write is ignored)."""
        verb = {"GET": "get", "PATCH": "patch", "PUT": "update"}.get(request.method)
        if verb is None:
            raise KubeError(405, "MethodNotAllowed", f"{request.method} is not supported here")
        if (verb, f"{res.plural}/status") in self._forbidden:
            raise KubeError(
                403,
                "Forbidden",
                f'{res.qualified} is forbidden: cannot {verb} resource "{res.plural}/status"',
            )
        current = copy.deepcopy(self._existing(res, ns, name))
        if verb == "get":
            return web.json_response(current)
        if verb == "update":
            if not isinstance(body, dict) or not (body.get("metadata") or {}).get(
                "resourceVersion"
            ):
                raise KubeError(422, "Invalid", "metadata.resourceVersion: must be specified")
            sent_rv = body["metadata"]["resourceVersion"]
            return web.json_response(
                self._store(res, ns, name, copy.deepcopy(body), sent_rv, "status")
            )
        if request.content_type != "application/merge-patch+json" or not isinstance(body, dict):
            raise KubeError(415, "UnsupportedMediaType", "this fake takes merge patches only")
        patched = merge_patch(copy.deepcopy(current), body)
        sent_rv = (body.get("metadata") or {}).get("resourceVersion")
        return web.json_response(self._store(res, ns, name, patched, sent_rv, "status"))

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
            return web.json_response(list_response(self, res, namespace, query))
        if verb == "watch":
            return await self._watch(request, res, namespace, query)
        if verb == "create":
            if not isinstance(body, dict):
                raise KubeError(400, "BadRequest", "create needs an object body")
            return web.json_response(self._create(res, ns, body, via_api=True), status=201)
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
        grace = query.get("gracePeriodSeconds")
        return web.json_response(
            self._delete(res, ns, name, body, int(grace) if grace is not None else None)
        )

    async def _watch(
        self, request: web.Request, res: Resource, namespace: str | None, query: dict[str, str]
    ) -> web.StreamResponse:
        labels = parse_label_selector(query.get("labelSelector", ""))
        fields = parse_field_selector(query.get("fieldSelector", ""))
        since = int(query.get("resourceVersion") or self._rv)
        deadline = asyncio.get_running_loop().time() + float(query.get("timeoutSeconds") or 30)
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        if query.get("resourceVersion") and since < self._compacted:
            # Resuming from a compacted version: the real server's answer is one ERROR event.
            gone = {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": f"too old resource version: {since} ({self._compacted})",
                "reason": "Expired",
                "code": 410,
            }
            await response.write((json.dumps({"type": "ERROR", "object": gone}) + "\n").encode())
            await response.write_eof()
            return response
        try:
            if not query.get("resourceVersion"):
                # "Get state and start at most recent": the current objects first, as ADDED.
                for obj in self.select(res, namespace, query):
                    await response.write(
                        (json.dumps({"type": "ADDED", "object": obj}) + "\n").encode()
                    )
            while not self._closing:
                for rv, r, change, obj, before in self._history:
                    if rv <= since or r != res:
                        continue
                    since = rv
                    ns = obj["metadata"].get("namespace", "")
                    if namespace is not None and ns != namespace:
                        continue
                    event = _seen_through_selector(change, obj, before, labels, fields)
                    if event is not None:
                        await response.write((json.dumps(event) + "\n").encode())
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


def _seen_through_selector(
    change: str, obj: Obj, before: Obj | None, labels: Any, fields: Any
) -> Obj | None:
    """The event a watch with these selectors gets for one change, or None.

    The real server's watch cache compares the object before and after a change: one that
    starts matching arrives as ADDED, one that stops matching as DELETED (carrying its last
    matching state at the change's resourceVersion), so a selective watcher's view never keeps
    an object that no longer belongs to it.
    """
    if change != "MODIFIED" or before is None:
        return {"type": change, "object": obj} if matches(obj, labels, fields) else None
    now, was = matches(obj, labels, fields), matches(before, labels, fields)
    if now:
        return {"type": "MODIFIED" if was else "ADDED", "object": obj}
    if was:
        gone = copy.deepcopy(before)
        gone["metadata"]["resourceVersion"] = obj["metadata"]["resourceVersion"]
        return {"type": "DELETED", "object": gone}
    return None


def _fires(fault: _Fault, method: str, path: str, token: str | None) -> bool:
    """Whether ``fault`` matches this request; if so, one of its ``times`` is used up."""
    if fault.times <= 0 or fault.method not in (method, "*") or not fault.path.search(path):
        return False
    if fault.token is not None and fault.token != token:
        return False
    fault.times -= 1
    return True


def _status(code: int, reason: str, message: str, list_continue: str = "") -> web.Response:
    return web.json_response(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {"continue": list_continue} if list_continue else {},
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
