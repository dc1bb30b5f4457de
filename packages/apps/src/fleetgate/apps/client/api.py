"""A small typed client of the fleetgate HTTP API, for scripts and for ``fleetgate nodes`` & co.

It answers with typed bodies of the API's wire format (``fleetgate.apps.client.bodies``, checked
against the API's OpenAPI document) and follows the ``Link: rel="next"`` header of the paged
lists. A request is one of the API's own pydantic request bodies (``fleetgate.apps.api.schemas``,
which check it when it is made) or a plain mapping of its fields, which the API checks. An error
answer raises :class:`ClientError` with
the API's ``error`` code and message; the token is never part of an error or a repr. It runs on
the standard library's HTTP (``transport``), so a client command starts at once::

    from fleetgate.client import FleetgateClient

    with FleetgateClient("http://127.0.0.1:8000", token) as api:
        for node in api.nodes():
            print(node.name, node.used.cpus, node.limits.cpus)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Protocol, TypeVar
from urllib.parse import quote

from fleetgate.apps.client.bodies import (
    ClaimBody,
    DryRunBody,
    EventBody,
    NewTokenBody,
    NodeBody,
    PlacementBody,
    PlacementSummary,
    PoolRotationBody,
    ResourcesBody,
    TokenBody,
    Wire,
    WireError,
)
from fleetgate.apps.client.defaults import DEFAULT_SERVER, SERVER_ENV, TOKEN_ENV
from fleetgate.apps.client.transport import (
    HttpTransport,
    Response,
    Transport,
    Unreachable,
    encode_query,
)
from fleetgate.apps.redaction import redact
from fleetgate.apps.wire import CLOCK_HEADER, VIRTUAL_CLOCK

Body = TypeVar("Body", bound=Wire)


class RequestModel(Protocol):
    """A request body of the API's schemas (pydantic): what ``model_dump`` writes is sent."""

    def model_dump(self, *, mode: str, exclude_none: bool) -> dict[str, Any]: ...


#: What a write takes: the API's request body, or a mapping of its fields (None: left out).
Request = RequestModel | Mapping[str, Any]


class ClientError(Exception):
    """The API answered an error (``status``, ``code``, ``message``) or could not be reached."""

    def __init__(self, status: int | None, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}" if status is None else f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


class FleetgateClient:
    """The API at ``server``, authenticated by ``token`` (the admin's or a namespace's)."""

    def __init__(
        self,
        server: str = DEFAULT_SERVER,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        transport: Transport | None = None,
    ) -> None:
        self._headers = {"Accept": "application/json", "User-Agent": "fleetgate-client"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self.server = server.rstrip("/")
        self._http: Transport = transport or HttpTransport(self.server, timeout)
        #: Whether the last answer's instants are on a virtual clock (``fleetgate up``).
        self.virtual_clock = False

    def __repr__(self) -> str:
        return f"FleetgateClient({redact(self.server)!r})"

    def __enter__(self) -> FleetgateClient:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the kept-alive connections."""
        self._http.close()

    # --- reads --------------------------------------------------------------------------------

    def nodes(self, *, page_size: int | None = None) -> list[NodeBody]:
        """Every node (admin token), following the pages."""
        return self._pages("/v1/nodes", NodeBody, page_size)

    def placements(self, namespace: str, *, page_size: int | None = None) -> list[PlacementSummary]:
        """Every placement of ``namespace``, following the pages."""
        return self._pages(self._placements(namespace), PlacementSummary, page_size)

    def claims(self, namespace: str) -> list[ClaimBody]:
        """The claims of ``namespace``."""
        return _list(ClaimBody, self._json("GET", self._claims(namespace)))

    def events(
        self,
        *,
        namespace: str | None = None,
        kind: str | None = None,
        limit: int = 100,
        newest_first: bool = False,
        after_id: int = 0,
    ) -> list[EventBody]:
        """Audit events after ``after_id`` (oldest first unless ``newest_first``), at most
        ``limit``."""
        params: dict[str, Any] = {"limit": limit, "order": "desc" if newest_first else "asc"}
        if after_id:
            params["after_id"] = after_id
        params.update({k: v for k, v in (("namespace", namespace), ("kind", kind)) if v})
        return _list(EventBody, self._json("GET", "/v1/events", params=params))

    def node(self, name: str) -> NodeBody:
        """One node (admin token)."""
        return NodeBody.from_wire(self._json("GET", self._node(name)))

    def tokens(self, namespace: str) -> list[TokenBody]:
        """The tokens of ``namespace``, revoked ones included, never their secrets (admin)."""
        return _list(TokenBody, self._json("GET", self._tokens(namespace)))

    def rotation_status(self) -> list[PoolRotationBody]:
        """Every NodePool's rotation standing: governance, window, A/G/C, gate, rotation."""
        return _list(PoolRotationBody, self._json("GET", "/v1/rotation/status"))

    def resources(self) -> ResourcesBody:
        """The cluster's totals, claims and unclaimed usage (admin token)."""
        return ResourcesBody.from_wire(self._json("GET", "/v1/admin/resources"))

    # --- writes -------------------------------------------------------------------------------

    def place(self, namespace: str, request: Request) -> PlacementBody:
        """Admit a placement; a refusal raises ClientError (507 or 403, with the reason)."""
        answer = self._json("POST", self._placements(namespace), json=_body(request))
        return PlacementBody.from_wire(answer)

    def dry_run(self, namespace: str, request: Request) -> DryRunBody:
        """Where a placement would land now, changing nothing; a refusal raises ClientError."""
        path, params = self._placements(namespace), {"dry_run": "true"}
        answer = self._json("POST", path, json=_body(request), params=params)
        return DryRunBody.from_wire(answer)

    def release(self, namespace: str, placement_id: str) -> None:
        """Release a placement (ClientError 404 when it is already gone)."""
        self._send("DELETE", f"{self._placements(namespace)}/{_segment(placement_id)}")

    def create_claim(self, namespace: str, request: Request) -> ClaimBody:
        """Reserve capacity for ``namespace`` (admin token)."""
        path = self._claims(namespace)
        return ClaimBody.from_wire(self._json("POST", path, json=_body(request)))

    def update_claim(self, namespace: str, claim_id: str, patch: Request) -> ClaimBody:
        """Change only the fields ``patch`` sets (admin token)."""
        path = f"{self._claims(namespace)}/{_segment(claim_id)}"
        return ClaimBody.from_wire(self._json("PATCH", path, json=_body(patch)))

    def delete_claim(self, namespace: str, claim_id: str) -> None:
        """Delete a claim (ClientError 404 when it is already gone)."""
        self._send("DELETE", f"{self._claims(namespace)}/{_segment(claim_id)}")

    def put_node(self, name: str, spec: Request) -> NodeBody:
        """Add the node, or replace its capacity, pool and labels (admin token)."""
        return NodeBody.from_wire(self._json("PUT", self._node(name), json=_body(spec)))

    def delete_node(self, name: str) -> None:
        """Remove the node (ClientError 409 ``node_busy`` while it holds placements)."""
        self._send("DELETE", self._node(name))

    def cordon(self, name: str) -> NodeBody:
        """Stop admitting onto the node; its placements stay."""
        return NodeBody.from_wire(self._json("POST", f"{self._node(name)}/cordon"))

    def uncordon(self, name: str) -> NodeBody:
        """Admit onto the node again."""
        return NodeBody.from_wire(self._json("POST", f"{self._node(name)}/uncordon"))

    def create_token(self, namespace: str) -> NewTokenBody:
        """A new token for ``namespace``; its secret is in this answer only (admin token)."""
        return NewTokenBody.from_wire(self._json("POST", self._tokens(namespace)))

    def revoke_token(self, namespace: str, token_id: str) -> None:
        """Revoke a token: it stops authenticating at once (ClientError 404 the second time)."""
        self._send("DELETE", f"{self._tokens(namespace)}/{_segment(token_id)}")

    # --- plumbing -----------------------------------------------------------------------------

    # Each name is one segment of the path, percent-encoded: a name with "?", "#" or " " reaches
    # the API as written, which judges it (its 422 names the field).

    @staticmethod
    def _placements(namespace: str) -> str:
        return f"/v1/namespaces/{_segment(namespace)}/placements"

    @staticmethod
    def _claims(namespace: str) -> str:
        return f"/v1/namespaces/{_segment(namespace)}/claims"

    @staticmethod
    def _tokens(namespace: str) -> str:
        return f"/v1/admin/namespaces/{_segment(namespace)}/tokens"

    @staticmethod
    def _node(name: str) -> str:
        return f"/v1/nodes/{_segment(name)}"

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Mapping[str, Any] | None = None,
    ) -> Response:
        target = path
        if params:
            target += ("&" if "?" in path else "?") + encode_query(dict(params))
        headers, body = self._headers, None
        if json is not None:
            headers = {**headers, "Content-Type": "application/json"}
            body = _dumps(json)
        try:
            response = self._http.request(method, target, headers, body)
        except Unreachable as exc:
            # ``--server http://user:pass@...``: the password is the caller's, never shown.
            raise ClientError(None, "unreachable", redact(f"{self.server}: {exc}")) from exc
        self.virtual_clock = response.headers.get(CLOCK_HEADER.lower()) == VIRTUAL_CLOCK
        if response.is_error:
            try:
                answer = response.json()
                code, message = str(answer["error"]), str(answer["message"])
            except (ValueError, KeyError, TypeError):
                code, message = "http_error", response.text[:200] or response.reason
            raise ClientError(response.status, code, message)
        return response

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._send(method, path, **kwargs).json()

    def _pages(self, path: str, body: type[Body], page_size: int | None) -> list[Body]:
        out: list[Body] = []
        # The API's next-page links carry the page size on, so only the first request names it.
        url: str | None = path if page_size is None else f"{path}?limit={page_size}"
        while url is not None:
            response = self._send("GET", url)
            out += _list(body, response.json())
            url = response.next_link()
        return out


def _list(body: type[Body], data: Any) -> list[Body]:
    if not isinstance(data, list):
        raise WireError(f"list[{body.__name__}]: expected an array, got {type(data).__name__}")
    return [body.from_wire(item) for item in data]


def _segment(value: str) -> str:
    """``value`` as one segment of a URL path (every reserved character percent-encoded)."""
    return quote(value, safe="")


def _body(request: Request) -> dict[str, Any]:
    """The request as JSON, leaving out what it does not set."""
    if isinstance(request, Mapping):
        return {k: v for k, v in request.items() if v is not None}
    return request.model_dump(mode="json", exclude_none=True)


def _dumps(data: Mapping[str, Any]) -> bytes:
    """JSON as httpx wrote a ``json=`` body: compact, UTF-8, no NaN."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


__all__ = [
    "DEFAULT_SERVER",
    "SERVER_ENV",
    "TOKEN_ENV",
    "ClientError",
    "FleetgateClient",
    "Request",
    "Transport",
]
