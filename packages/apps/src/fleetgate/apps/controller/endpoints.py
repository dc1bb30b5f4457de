"""The controller's HTTP endpoints: ``/metrics`` (spec 10: ``:8080``) and the kubelet's probes
``/healthz`` and ``/readyz`` (``:8081``).

``/readyz`` answers 200 only while this replica *leads* (or, without leader election, once the
loop runs): with two replicas the Service and ``kubectl get pods`` show which one acts, and a
replica that lost its lease stops looking ready at once. ``/healthz`` answers 200 while the
process serves at all, so a follower is never restarted for merely waiting.

A few lines of asyncio rather than a web framework: three fixed GETs, no body, one process.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


class ControllerEndpoints:
    """Serves metrics on one port and the probes on another; port 0 picks a free one."""

    def __init__(
        self,
        registry: CollectorRegistry,
        ready: Callable[[], bool],
        *,
        host: str = "127.0.0.1",
        metrics_port: int | None = 8080,
        probes_port: int | None = 8081,
    ) -> None:
        self.registry = registry
        self.ready = ready
        self.host = host
        self._wanted = {"metrics": metrics_port, "probes": probes_port}
        self._servers: dict[str, asyncio.Server] = {}
        self.ports: dict[str, int] = {}

    async def start(self) -> None:
        """Start listening on every configured port."""
        for name, port in self._wanted.items():
            if port is None:
                continue
            server = await asyncio.start_server(
                functools.partial(self._serve, name), self.host, port
            )
            self._servers[name] = server
            self.ports[name] = server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Stop listening."""
        for server in self._servers.values():
            server.close()
            await server.wait_closed()
        self._servers.clear()

    def respond(self, which: str, method: str, path: str) -> tuple[int, str, bytes]:
        """Status, content type and body for one request to the ``which`` listener."""
        if method not in ("GET", "HEAD"):
            return 405, "text/plain", b"method not allowed\n"
        if which == "metrics" and path == "/metrics":
            return 200, CONTENT_TYPE_LATEST, generate_latest(self.registry)
        if which == "probes" and path == "/healthz":
            return 200, "text/plain", b"ok\n"
        if which == "probes" and path == "/readyz":
            if self.ready():
                return 200, "text/plain", b"ready: leading\n"
            return 503, "text/plain", b"not ready: not the leader (or not started)\n"
        return 404, "text/plain", b"not found\n"

    async def _serve(
        self, which: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            request_line = await asyncio.wait_for(reader.readline(), timeout=5)
            while (await asyncio.wait_for(reader.readline(), timeout=5)) not in (
                b"\r\n",
                b"\n",
                b"",
            ):
                pass  # headers: nothing here depends on them
            parts = request_line.decode("latin-1").split()
            method, path = (parts[0], parts[1].split("?")[0]) if len(parts) >= 2 else ("", "")
            status, ctype, body = self.respond(which, method, path)
            head = (
                f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode("latin-1") + (b"" if method == "HEAD" else body))
            await writer.drain()
        except (TimeoutError, ConnectionError):
            pass  # a probe that hung up or never spoke: nothing to answer
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
