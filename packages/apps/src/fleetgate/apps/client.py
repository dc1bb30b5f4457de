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

from fleetgate.apps.api.routes.rotation_status import PoolRotationBody
from fleetgate.apps.api.schemas import (
    ClaimBody,
    DryRunBody,
    EventBody,
    NodeBody,
    PlacementBody,
    PlacementCreate,
    PlacementSummary,
    ResourcesBody,
)
from fleetgate.apps.redaction import redact

SERVER_ENV, TOKEN_ENV = "FLEETGATE_SERVER", "FLEETGATE_TOKEN"
DEFAULT_SERVER = "http://127.0.0.1:8000"
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
    ) -> list[EventBody]:
        """Audit events (oldest first unless ``newest_first``), at most ``limit``."""
        params: dict[str, Any] = {"limit": limit, "order": "desc" if newest_first else "asc"}
        params.update({k: v for k, v in (("namespace", namespace), ("kind", kind)) if v})
        return TypeAdapter(list[EventBody]).validate_python(
            self._json("GET", "/v1/events", params=params)
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

    # --- plumbing -----------------------------------------------------------------------------

    @staticmethod
    def _placements(namespace: str) -> str:
        return f"/v1/namespaces/{namespace}/placements"

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


def _body(request: PlacementCreate) -> dict[str, Any]:
    """The request as JSON, leaving out what it does not set."""
    return request.model_dump(mode="json", exclude_none=True)


__all__ = ["DEFAULT_SERVER", "SERVER_ENV", "TOKEN_ENV", "ClientError", "FleetgateClient"]
