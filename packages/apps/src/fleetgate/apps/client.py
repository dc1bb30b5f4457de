"""A small typed client of the fleetgate HTTP API, for scripts and for ``fleetgate nodes`` & co.

It answers with the API's own pydantic bodies (``fleetgate.apps.api.schemas``), so a field the
API adds is there for callers at once, and it follows the ``Link: rel="next"`` header of the
paged lists. An error answer raises :class:`ClientError` with the API's ``error`` code and
message; the token is never part of an error or a repr::

    from fleetgate.client import FleetgateClient

    with FleetgateClient("http://127.0.0.1:8000", token) as api:
        for node in api.nodes():
            print(node.name, node.used.cpus, node.limits.cpus)
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, TypeAdapter

from fleetgate.apps.api.schemas import (
    ClaimBody,
    ClaimCreate,
    ClaimPatch,
    DryRunBody,
    EventBody,
    NewTokenBody,
    NodeBody,
    NodePut,
    PlacementBody,
    PlacementCreate,
    PlacementSummary,
    PoolRotationBody,
    ResourcesBody,
    TokenBody,
)
from fleetgate.apps.clientdefaults import DEFAULT_SERVER, SERVER_ENV, TOKEN_ENV
from fleetgate.apps.redaction import redact

Body = TypeVar("Body", bound=BaseModel)


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
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.server = server.rstrip("/")
        self._http = httpx.Client(
            base_url=self.server, headers=headers, timeout=timeout, transport=transport
        )

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
        """Close the connection pool."""
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
        return TypeAdapter(list[ClaimBody]).validate_python(
            self._json("GET", f"/v1/namespaces/{namespace}/claims")
        )

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
        return TypeAdapter(list[EventBody]).validate_python(
            self._json("GET", "/v1/events", params=params)
        )

    def node(self, name: str) -> NodeBody:
        """One node (admin token)."""
        return NodeBody.model_validate(self._json("GET", f"/v1/nodes/{name}"))

    def tokens(self, namespace: str) -> list[TokenBody]:
        """The tokens of ``namespace``, revoked ones included, never their secrets (admin)."""
        return TypeAdapter(list[TokenBody]).validate_python(
            self._json("GET", self._tokens(namespace))
        )

    def rotation_status(self) -> list[PoolRotationBody]:
        """Every NodePool's rotation standing: governance, window, A/G/C, gate, rotation."""
        return TypeAdapter(list[PoolRotationBody]).validate_python(
            self._json("GET", "/v1/rotation/status")
        )

    def resources(self) -> ResourcesBody:
        """The cluster's totals, claims and unclaimed usage (admin token)."""
        return ResourcesBody.model_validate(self._json("GET", "/v1/admin/resources"))

    # --- writes -------------------------------------------------------------------------------

    def place(self, namespace: str, request: PlacementCreate) -> PlacementBody:
        """Admit a placement; a refusal raises ClientError (507 or 403, with the reason)."""
        answer = self._json("POST", self._placements(namespace), json=_body(request))
        return PlacementBody.model_validate(answer)

    def dry_run(self, namespace: str, request: PlacementCreate) -> DryRunBody:
        """Where a placement would land now, changing nothing; a refusal raises ClientError."""
        path, params = self._placements(namespace), {"dry_run": "true"}
        answer = self._json("POST", path, json=_body(request), params=params)
        return DryRunBody.model_validate(answer)

    def release(self, namespace: str, placement_id: str) -> None:
        """Release a placement (ClientError 404 when it is already gone)."""
        self._send("DELETE", f"{self._placements(namespace)}/{placement_id}")

    def create_claim(self, namespace: str, request: ClaimCreate) -> ClaimBody:
        """Reserve capacity for ``namespace`` (admin token)."""
        path = f"/v1/namespaces/{namespace}/claims"
        return ClaimBody.model_validate(self._json("POST", path, json=_body(request)))

    def update_claim(self, namespace: str, claim_id: str, patch: ClaimPatch) -> ClaimBody:
        """Change only the fields ``patch`` sets (admin token)."""
        path = f"/v1/namespaces/{namespace}/claims/{claim_id}"
        return ClaimBody.model_validate(self._json("PATCH", path, json=_body(patch)))

    def delete_claim(self, namespace: str, claim_id: str) -> None:
        """Delete a claim (ClientError 404 when it is already gone)."""
        self._send("DELETE", f"/v1/namespaces/{namespace}/claims/{claim_id}")

    def put_node(self, name: str, spec: NodePut) -> NodeBody:
        """Add the node, or replace its capacity, pool and labels (admin token)."""
        return NodeBody.model_validate(self._json("PUT", f"/v1/nodes/{name}", json=_body(spec)))

    def delete_node(self, name: str) -> None:
        """Remove the node (ClientError 409 ``node_busy`` while it holds placements)."""
        self._send("DELETE", f"/v1/nodes/{name}")

    def cordon(self, name: str) -> NodeBody:
        """Stop admitting onto the node; its placements stay."""
        return NodeBody.model_validate(self._json("POST", f"/v1/nodes/{name}/cordon"))

    def uncordon(self, name: str) -> NodeBody:
        """Admit onto the node again."""
        return NodeBody.model_validate(self._json("POST", f"/v1/nodes/{name}/uncordon"))

    def create_token(self, namespace: str) -> NewTokenBody:
        """A new token for ``namespace``; its secret is in this answer only (admin token)."""
        return NewTokenBody.model_validate(self._json("POST", self._tokens(namespace)))

    def revoke_token(self, namespace: str, token_id: str) -> None:
        """Revoke a token: it stops authenticating at once (ClientError 404 the second time)."""
        self._send("DELETE", f"{self._tokens(namespace)}/{token_id}")

    # --- plumbing -----------------------------------------------------------------------------

    @staticmethod
    def _placements(namespace: str) -> str:
        return f"/v1/namespaces/{namespace}/placements"

    @staticmethod
    def _tokens(namespace: str) -> str:
        return f"/v1/admin/namespaces/{namespace}/tokens"

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            # ``--server http://user:pass@...``: the password is the caller's, never shown.
            raise ClientError(None, "unreachable", redact(f"{self.server}: {exc}")) from exc
        if response.is_error:
            try:
                body = response.json()
                code, message = str(body["error"]), str(body["message"])
            except (ValueError, KeyError, TypeError):
                code, message = "http_error", response.text[:200] or response.reason_phrase
            raise ClientError(response.status_code, code, message)
        return response

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._send(method, path, **kwargs).json()

    def _pages(self, path: str, body: type[Body], page_size: int | None) -> list[Body]:
        out: list[Body] = []
        # The API's next-page links carry the page size on, so only the first request names it.
        url: str | None = path if page_size is None else f"{path}?limit={page_size}"
        while url is not None:
            response = self._send("GET", url)
            out += [body.model_validate(item) for item in response.json()]
            following = response.links.get("next", {}).get("url")
            url = following if following else None
        return out


def _body(request: BaseModel) -> dict[str, Any]:
    """The request as JSON, leaving out what it does not set."""
    return request.model_dump(mode="json", exclude_none=True)


__all__ = ["DEFAULT_SERVER", "SERVER_ENV", "TOKEN_ENV", "ClientError", "FleetgateClient"]
