"""The controller's HTTP endpoints: ``/metrics`` (spec 10: ``:8080``) and, on ``:8081``, the
kubelet's probes ``/healthz`` and ``/readyz`` and the leadership endpoint ``/leaderz``.

``/readyz`` answers 200 on every replica that passed preflight, leading or standing by: a standby
is exactly what a rollout needs (it takes over the moment the leader goes), so ``helm install
--wait`` and ``kubectl rollout status`` finish and a PodDisruptionBudget can count it. Which
replica acts is reported separately: the gauge ``fleetgate_controller_leader`` (1 on the leader)
and ``/leaderz`` (200 on the leader, 503 elsewhere). ``/healthz`` answers 200 while the process
serves at all.

A few lines of asyncio rather than a web framework: four fixed GETs, no body, one process.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Gauge, generate_latest

LEADER_METRIC = "fleetgate_controller_leader"
_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


class ControllerEndpoints:
    """Serves metrics on one port and the probes on another; port 0 picks a free one.

    ``ready`` says whether the replica can serve (preflight passed); ``leading`` whether it holds
    the Lease and acts.
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        ready: Callable[[], bool],
        *,
        leading: Callable[[], bool] = lambda: False,
        host: str = "127.0.0.1",
        metrics_port: int | None = 8080,
        probes_port: int | None = 8081,
    ) -> None:
        self.registry = registry
        self.ready = ready
        self.leading = leading
        Gauge(
            LEADER_METRIC,
            "1 while this replica holds the Lease and acts, else 0.",
            registry=registry,
        ).set_function(lambda: float(self.leading()))
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
        role = b"leading" if self.leading() else b"standing by"
        if which == "probes" and path == "/readyz":
            if self.ready():
                return 200, "text/plain", b"ready: " + role + b"\n"
            return 503, "text/plain", b"not ready: starting (preflight not passed yet)\n"
        if which == "probes" and path == "/leaderz":
            return (200 if self.leading() else 503), "text/plain", role + b"\n"
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
