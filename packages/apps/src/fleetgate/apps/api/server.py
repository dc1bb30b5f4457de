"""``fleetgate api``: serve the HTTP API with uvicorn over the configured ledger.

Without ``api.admin_token`` (``FLEETGATE_API__ADMIN_TOKEN``) in the configuration, a random admin
token is generated for this run and printed once on standard error: it is never stored, so a
restart makes a new one. Configure a token for anything but a trial.

``--workers N`` (N > 1) serves from N worker processes, each listening on a socket of its own on
the one address (``workers``). Each worker builds its own container from the environment, so the
parent migrates the schema once first (workers then find it at head) and hands the admin token
it settled on down through ``FLEETGATE_API__ADMIN_TOKEN``: a generated token is accepted by every
worker. Each worker keeps its own node snapshot; a node changed through one worker reaches the
others' placements within ``capacity.snapshot_seconds``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import secrets
import signal
import socket
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Literal

import structlog
import uvicorn

from fleetgate.apps.api.app import create_app
from fleetgate.apps.api.metrics import MULTIPROC_ENV
from fleetgate.apps.container import Container, build_container
from fleetgate.apps.heap import settle_heap
from fleetgate.apps.logging import StderrHandler, configure_logging
from fleetgate.apps.redaction import hide
from fleetgate.apps.settings import ConfigError, Settings, load_settings
from fleetgate.apps.startup import StartupFailed, invalid, start_ledger
from fleetgate.domain.ports import LedgerLifecycle

EXIT_OK, EXIT_FAILED, EXIT_INVALID = 0, 1, 2  # 1: start-up failed (cli.main prints why)
_log = structlog.get_logger("fleetgate.api")


def with_admin_token(settings: Settings) -> tuple[Settings, str | None]:
    """``settings`` with an admin token, and the token if one had to be generated."""
    if settings.api.admin_token:
        return settings, None
    token = secrets.token_urlsafe(32)
    api = settings.api.model_copy(update={"admin_token": token})
    return settings.model_copy(update={"api": api}), token


def _interrupted(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


ADMIN_TOKEN_ENV = "FLEETGATE_API__ADMIN_TOKEN"
#: uvicorn's access log line: client, method, path, HTTP version, status.
ACCESS_FORMAT = "%(asctime)s access %(message)s"


def fast_loop() -> Literal["uvloop", "asyncio"]:
    """The event loop to serve with: uvloop where installed (a declared dependency)."""
    # uvloop does not build on Windows; the asyncio loop is the fallback. Named here rather than
    # left to uvicorn's ``auto`` so that the choice is visible and tested.
    return "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"


def fast_http() -> Literal["httptools", "h11"]:
    """The HTTP parser to serve with: httptools where installed (a declared dependency)."""
    return "httptools" if importlib.util.find_spec("httptools") else "h11"


def cheap_access_log() -> None:
    """Give uvicorn's access log a plain formatter of its own, off the structured chain.

    One line per request through structlog's processors and renderer cost more than routing the
    request; the access line is fixed in shape, so %-formatting it is enough. Its level and
    destination (stderr) are those of every other log line.
    """
    access = logging.getLogger("uvicorn.access")
    handler = StderrHandler()
    handler.setFormatter(logging.Formatter(ACCESS_FORMAT))
    access.handlers[:] = [handler]
    access.propagate = False


def worker_app() -> object:
    """The app of one worker process (``--workers``): built from the environment, as a factory."""
    settings = load_settings()
    configure_logging(settings.log_format)
    cheap_access_log()
    app = create_app(build_container(settings))
    settle_heap()
    return app


async def _migrate(settings: Settings) -> None:
    ledger: LedgerLifecycle = build_container(settings).ledger()
    try:
        await start_ledger(ledger, settings.database_url)
    finally:
        await ledger.close()


def _run_workers(settings: Settings, host: str, port: int, workers: int) -> int:
    # The sockets are closed whatever happens next: a database that cannot be reached is one
    # line (cli.main), not that line and a ResourceWarning about the sockets.
    sockets = _worker_sockets(host, port, workers)
    try:
        asyncio.run(_migrate(settings))  # a failure is one line, as for a single process
        assert settings.api.admin_token is not None
        os.environ[ADMIN_TOKEN_ENV] = settings.api.admin_token
        with _shared_metrics_dir():
            return _serve_workers(host, port, workers, sockets)
    finally:
        for sock in sockets:
            sock.close()


def _worker_sockets(host: str, port: int, workers: int) -> list[socket.socket]:
    """A listening socket per worker, all on one address (``SO_REUSEPORT``, see ``workers``).

    The address is taken first without ``SO_REUSEPORT``, so a port another server holds (even
    another fleetgate with sockets of its own) is refused as before, and port 0 picks one port
    for all of them.
    """
    with _bound(host, port) as probe:
        port = probe.getsockname()[1]
    sockets: list[socket.socket] = []
    try:
        for _ in range(workers):
            sockets.append(_bound(host, port, reuse_port=True))
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


@contextmanager
def _shared_metrics_dir() -> Iterator[None]:
    # Workers are spawned, so they import prometheus_client with this variable already set and
    # write their series to files there; each worker's /metrics then merges every worker's.
    if os.environ.get(MULTIPROC_ENV):
        yield  # the operator chose the directory (and its clean-up)
        return
    with tempfile.TemporaryDirectory(prefix="fleetgate-metrics-") as path:
        os.environ[MULTIPROC_ENV] = path
        try:
            yield
        finally:
            del os.environ[MULTIPROC_ENV]


def _serve_workers(host: str, port: int, workers: int, sockets: list[socket.socket]) -> int:
    from fleetgate.apps.api.workers import Workers

    # Each worker makes its uvicorn Config from these (a Config holds a loop and loggers that
    # do not cross a process boundary); the app is built in the worker from the environment.
    config = {
        "app": f"{__name__}:worker_app",
        "factory": True,
        "host": host,
        "port": port,
        "lifespan": "on",
        "log_config": None,
        "access_log": False,  # the API writes its own structured access log (api/metrics.py)
        "proxy_headers": False,
        "loop": fast_loop(),
        "http": fast_http(),
    }
    # The supervisor handles SIGINT/SIGTERM itself: it stops the workers and returns.
    Workers(config, sockets).run()
    return EXIT_OK


def _listening_socket(host: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    # Made here rather than by uvicorn's bind_socket, which leaves the protocol 0: asyncio turns
    # on TCP_NODELAY only for sockets that say they are TCP, so each response on a kept-alive
    # connection then waited some 40 ms for the client's delayed ACK (Nagle's algorithm).
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def run_api(host: str | None, port: int | None, workers: int = 1) -> int:
    """Serve until interrupted; 0 after a clean shutdown, 1 if start-up failed, 2 bad config."""
    try:
        settings = load_settings()
    except ConfigError as exc:
        return invalid(str(exc))
    configure_logging(settings.log_format)
    cheap_access_log()
    settings, generated = with_admin_token(settings)
    container = build_container(settings)
    try:
        container.ledger()  # a scheme no plugin serves is invalid configuration, as for `db`
    except LookupError as exc:
        return invalid(str(exc))
    if generated is not None:
        print(
            "fleetgate api: no admin token configured (api.admin_token); "
            f"generated one for this run:\n{generated}",
            file=sys.stderr,
            flush=True,
        )
        hide(generated)  # printed once, above; never again in a log line
    bind_host = host or settings.api.host
    bind_port = settings.api.port if port is None else port
    if workers > 1:
        return _run_workers(settings, bind_host, bind_port, workers)
    # Bound before anything starts: a taken port is one line (cli.main), not uvicorn's log.
    sock = _bound(bind_host, bind_port)
    config = uvicorn.Config(
        create_app(container, start_ledger=False),
        host=bind_host,
        port=bind_port,
        lifespan="on",
        log_config=None,  # our structlog configuration handles uvicorn's loggers too
        access_log=False,  # the API writes its own structured access log (api/metrics.py)
        proxy_headers=False,
        loop=fast_loop(),
        http=fast_http(),
    )
    server = uvicorn.Server(config)
    # uvicorn shuts down gracefully on SIGINT/SIGTERM, then re-raises the signal; with these
    # handlers that ends here as KeyboardInterrupt, so a requested stop exits 0.
    previous = {s: signal.signal(s, _interrupted) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with sock, asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:
            return runner.run(_serve(container, server, sock))
    except KeyboardInterrupt:
        return EXIT_OK  # the stop we were asked for
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _bound(host: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    """The listening socket, or StartupFailed naming the address (a taken port, say)."""
    try:
        return _listening_socket(host, port, reuse_port=reuse_port)
    except OSError as exc:
        raise StartupFailed(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc


async def _serve(container: Container, server: uvicorn.Server, sock: socket.socket) -> int:
    """Start the ledger (a failure is StartupFailed, one line), serve, close the ledger."""
    ledger: LedgerLifecycle = container.ledger()
    await start_ledger(ledger, container.settings().database_url)
    settle_heap()
    host, port = sock.getsockname()[:2]
    _log.info("serving the API", url=f"http://{host}:{port}")
    try:
        await server.serve(sockets=[sock])
    except SystemExit as exc:  # uvicorn exits the process when its own start-up fails
        raise StartupFailed("the HTTP server did not start") from exc
    finally:
        await ledger.close()
    return EXIT_OK if server.started else EXIT_FAILED
