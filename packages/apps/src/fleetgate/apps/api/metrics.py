"""The API's own Prometheus series (``fleetgate_api_``) and the middleware that feeds them.

Every process that serves the API exports: admissions by namespace, stage and outcome;
admission latency; HTTP request duration by method, route template and status; requests in
flight; and the process and platform collectors. With ``fleetgate api --workers N`` the parent
sets ``PROMETHEUS_MULTIPROC_DIR`` before the workers start, so each worker writes its series to
shared files and any worker's ``/metrics`` answers for all of them (prometheus_client's
multiprocess mode). The process collector describes one process, so that mode leaves it out.

The same middleware gives every request its id (``X-Request-ID``: the caller's, or a new one),
returns it, binds it to every log line and audit event of the request, and writes one
structured access-log line per request.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fleetgate.apps.logging import REQUEST_ID_HEADER, request_id_from, request_scope
from fleetgate.apps.wire import CLOCK_HEADER, VIRTUAL_CLOCK

PREFIX = "fleetgate_api_"
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
#: Admission outcomes, as the ``outcome`` label spells them.
ADMITTED, REFUSED, WAIVED = "admitted", "refused", "waived"
OVER_CLAIM, ERROR = "over_claim", "error"
#: The ``stage`` label of an outcome no stage refused (admitted, waived, over claim).
NO_STAGE = "none"
#: The ``route`` label of a request that matched no route (a 404 on an unknown path).
UNMATCHED = "unmatched"

_access = structlog.get_logger("fleetgate.access")
# Sub-millisecond to ten seconds: an admission on a warm snapshot takes a few milliseconds.
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def multiprocess_dir() -> str | None:
    """The shared metrics directory when this process is one of several workers, else None."""
    return os.environ.get(MULTIPROC_ENV) or None


class ApiMetrics:
    """The API's series, registered on ``registry`` (with the process and platform collectors)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.admissions = Counter(
            PREFIX + "admissions",
            "Placement admissions, by namespace, deciding stage and outcome.",
            ["namespace", "stage", "outcome"],
            registry=registry,
        )
        self.admission_seconds = Histogram(
            PREFIX + "admission_duration_seconds",
            "Time to decide one placement admission, by outcome.",
            ["outcome"],
            buckets=_BUCKETS,
            registry=registry,
        )
        self.http_seconds = Histogram(
            PREFIX + "http_request_duration_seconds",
            "HTTP request duration, by method, route template and status.",
            ["method", "route", "status"],
            buckets=_BUCKETS,
            registry=registry,
        )
        self.in_flight = Gauge(
            PREFIX + "http_requests_in_flight",
            "HTTP requests being served.",
            registry=registry,
            multiprocess_mode="livesum",
        )
        if multiprocess_dir() is None:
            for collector in (ProcessCollector(registry=None), PlatformCollector(registry=None)):
                registry.register(collector)

    def count_admission(self, namespace: str, stage: str, outcome: str, seconds: float) -> None:
        """One admission decided: the counter and the latency histogram."""
        self.admissions.labels(namespace, stage, outcome).inc()
        self.admission_seconds.labels(outcome).observe(seconds)

    def exposition(self) -> bytes:
        """Every series this API exports, in the text format (all workers' in multiprocess mode)."""
        path = multiprocess_dir()
        if path is None:
            return generate_latest(self.registry)
        merged = CollectorRegistry()
        MultiProcessCollector(merged, path=path)  # type: ignore[no-untyped-call]
        merged.register(PlatformCollector(registry=None))
        return generate_latest(merged)


def refusal_stage(stages: Iterable[str]) -> str:
    """The ``stage`` label of a refusal: the one stage every candidate refused at, or ``mixed``."""
    found = set(stages)
    return found.pop() if len(found) == 1 else "mixed"


def route_template(scope: Scope) -> str:
    """The matched route's path template (``/v1/nodes/{name}``), never the raw path."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else UNMATCHED


class ObservedRequests:
    """ASGI middleware: request id, duration and in-flight series, and the access-log line."""

    def __init__(self, app: ASGIApp, metrics: ApiMetrics, *, virtual_clock: bool = False) -> None:
        self.app = app
        self.metrics = metrics
        # Under ``fleetgate up`` every answer says its instants are virtual (the client labels
        # them); on a real clock nothing is added.
        self.extra_headers: list[tuple[bytes, bytes]] = []
        if virtual_clock:
            self.extra_headers.append((CLOCK_HEADER.lower().encode(), VIRTUAL_CLOCK.encode()))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one request inside its request-id scope, timing and logging it."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = next(
            (v.decode("latin-1") for k, v in scope["headers"] if k == b"x-request-id"), None
        )
        request_id = request_id_from(given)
        status = 500  # what the client sees if the app fails before starting a response
        raw_id = request_id.encode("latin-1")

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = [
                    (k, v) for k, v in message.get("headers", []) if k.lower() != b"x-request-id"
                ]
                headers.append((REQUEST_ID_HEADER.lower().encode(), raw_id))
                headers += self.extra_headers
                message = {**message, "headers": headers}
            await send(message)

        start = time.perf_counter()
        self.metrics.in_flight.inc()
        try:
            with request_scope(request_id):
                try:
                    await self.app(scope, receive, send_with_id)
                finally:
                    seconds = time.perf_counter() - start
                    method, route = scope["method"], route_template(scope)
                    self.metrics.http_seconds.labels(method, route, str(status)).observe(seconds)
                    _access.info(
                        "request",
                        method=method,
                        route=route,
                        path=scope["path"],
                        status=status,
                        duration_ms=round(seconds * 1000, 3),
                    )
        finally:
            self.metrics.in_flight.dec()


__all__ = [
    "ADMITTED",
    "ERROR",
    "NO_STAGE",
    "OVER_CLAIM",
    "REFUSED",
    "WAIVED",
    "ApiMetrics",
    "ObservedRequests",
    "multiprocess_dir",
    "refusal_stage",
    "route_template",
]
