"""``fleetgate up``: the whole system in one process, on SQLite and the fake cluster.

One asyncio loop runs uvicorn (the API and the dashboard), and the accelerated-time runtime (the
rotation controller, the node sync, the reconcile pass and the workload generator). Everything
is built by the composition root; ``up`` only chooses the embedded backends, a virtual clock,
and the sample fleet.

The database is ``./.fleetgate/up.db``, created afresh on every start: the fake cluster lives in
memory, so a ledger left from an earlier run would describe nodes that no longer exist. (It is a
file of its own so that ``up`` never touches the ``fleetgate.db`` that ``fleetgate api`` uses.)
Before it deletes anything, ``up`` binds its port and takes the lock on ``./.fleetgate``
(``datadir``): a second ``up`` in the same directory, or on the same port, exits with one line
naming the running one, whose database it never touches.

Exit codes: 0 after Ctrl-C (SIGINT) or SIGTERM, 1 when start-up failed (the port is taken, say),
2 for invalid input (a policy file, the configuration).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import uvicorn
from rich.console import Console

from fleetgate.apps.api.app import create_app
from fleetgate.apps.api.dashboard import install_dashboard
from fleetgate.apps.api.server import with_admin_token
from fleetgate.apps.container import Container, up_container
from fleetgate.apps.logging import configure_logging
from fleetgate.apps.policyfile import PolicyFileError, load_policies
from fleetgate.apps.redaction import error_markup
from fleetgate.apps.settings import ConfigError, Settings, load_settings
from fleetgate.apps.signals import stop_on_signals
from fleetgate.apps.up.datadir import AlreadyRunning, DataDirLock
from fleetgate.apps.up.fleet import DEFAULT_POLICIES, NAMESPACES, plan_pools, virtual_start
from fleetgate.apps.up.runtime import seed
from fleetgate.domain.durations import format_duration

DATA_DIR = Path(".fleetgate")
DATABASE = DATA_DIR / "up.db"
EXIT_OK, EXIT_FAILED, EXIT_INVALID = 0, 1, 2
_out = Console(soft_wrap=True, highlight=False)
_err = Console(stderr=True, soft_wrap=True, highlight=False)


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: ``up`` stops its tasks first, then the server."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def up_settings(settings: Settings, policy_file: Path, port: int) -> Settings:
    """The configuration with ``up``'s choices: SQLite file, fake cluster, the policy file."""
    settings, _ = with_admin_token(settings)
    return settings.model_copy(
        update={
            "database_url": f"sqlite+aiosqlite:///{DATABASE.resolve()}",
            "cluster": "fake",
            "cluster_options": {},
            "api": settings.api.model_copy(update={"port": port}),
            # ``up`` runs the node sync, so its controller (and the status the API reports)
            # judges the ledger before a drain, as ``controller.sync_ledger`` does in production.
            "controller": settings.controller.model_copy(
                update={"policies": [policy_file], "leader_election": False, "sync_ledger": True}
            ),
        }
    )


def fresh_database() -> None:
    """Remove the previous run's database (and SQLite's WAL and shared-memory files)."""
    DATA_DIR.mkdir(exist_ok=True)
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{DATABASE}{suffix}").unlink(missing_ok=True)


#: What ``--verbose`` streams: every line the controller and the reconciler log.
VERBOSE_LOGGERS = ("fleetgate.controller", "fleetgate.reconciler")


def quiet_logging(settings: Settings, verbose: bool = False) -> None:
    """Warnings and errors on the console; the audit events stay in the ledger (the dashboard,
    ``/v1/events``) and reach the console only as errors. ``verbose`` adds the controller's and
    the reconciler's info lines (each pass's decisions)."""
    configure_logging(settings.log_format, level=logging.WARNING)
    logging.getLogger("fleetgate.events").setLevel(logging.ERROR)
    for name in VERBOSE_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO if verbose else logging.NOTSET)


def run_up(policy: Path | None, nodes: int, speed: float, port: int, verbose: bool = False) -> int:
    """Entry point of ``fleetgate up`` (see the module docstring for exit codes)."""
    policy_file = policy or DEFAULT_POLICIES
    try:
        policies = load_policies(policy_file)
        settings = up_settings(load_settings(), policy_file, port)
    except (PolicyFileError, ConfigError) as exc:
        _err.print(error_markup(str(exc)))
        return EXIT_INVALID
    if speed <= 0:
        _err.print("[red]error:[/red] --speed: must be positive")
        return EXIT_INVALID
    quiet_logging(settings, verbose)
    lock = DataDirLock(DATA_DIR)
    # The port first, then the directory's lock, and only then the previous run's files: a
    # second instance must fail before it can delete the running one's database.
    try:
        sock = listen(settings.api.host, settings.api.port)
    except OSError as exc:
        _err.print(error_markup(_refused_port(settings, lock, exc)))
        return EXIT_FAILED
    try:
        with lock:
            lock.record(sock.getsockname()[1])
            fresh_database()
            return asyncio.run(_main(settings, policies, nodes, speed, sock))
    except AlreadyRunning as exc:
        _err.print(error_markup(str(exc)))
        return EXIT_FAILED
    except KeyboardInterrupt:  # Ctrl-C before the handlers were in place (while seeding)
        return EXIT_OK
    except Exception as exc:  # start-up failed: say what, not a traceback
        _err.print(error_markup(f"fleetgate up could not start: {type(exc).__name__}: {exc}"))
        return EXIT_FAILED
    finally:
        sock.close()


def _refused_port(settings: Settings, lock: DataDirLock, exc: OSError) -> str:
    """The one line for a port that cannot be bound, naming the ``up`` that holds it if it is
    the one running from this directory."""
    where = f"{settings.api.host}:{settings.api.port}"
    found = lock.holder()
    if found is not None and found.port == settings.api.port:
        return (
            f"cannot listen on {where}: another fleetgate up is running there "
            f"(pid {found.pid}, from {DATA_DIR.resolve()})"
        )
    return f"cannot listen on {where}: {exc.strerror or exc}"


def listen(host: str, port: int) -> socket.socket:
    """The server's listening socket, bound before anything else starts (a taken port fails
    fast, and port 0 is resolved to the one the banner prints)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=128)


async def _main(
    settings: Settings, policies: list[Any], nodes: int, speed: float, sock: socket.socket
) -> int:
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    container = up_container(settings, virtual_start(policies, now), speed)
    ledger = container.ledger()
    try:
        await ledger.start()
        return await _run(container, settings, policies, nodes, speed, sock)
    finally:
        await ledger.close()


async def _run(
    container: Container,
    settings: Settings,
    policies: list[Any],
    nodes: int,
    speed: float,
    sock: socket.socket,
) -> int:
    plans = plan_pools(policies, nodes)
    cluster, clock = container.simulated_cluster(), container.clock()
    await seed(cluster, clock, container.node_sync(), container.up_workload(), plans)
    runtime, status = container.up_runtime(), container.up_status()
    app = create_app(container)
    install_dashboard(app, status.snapshot, settings.api.admin_token)
    config = uvicorn.Config(
        app,
        host=settings.api.host,
        port=settings.api.port,
        lifespan="on",
        log_config=None,
        proxy_headers=False,
    )
    server = _Server(config)
    stop = asyncio.Event()
    with stop_on_signals(stop):
        serving = asyncio.create_task(_serve(server, sock))
        if not await _started(server, serving):
            _err.print("[red]error:[/red] the HTTP server did not start")
            return EXIT_FAILED
        _banner(settings, sock.getsockname()[1], plans, speed)
        running = asyncio.create_task(runtime.run(stop))
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait({serving, running, stopped}, return_when=asyncio.FIRST_COMPLETED)
        stop.set()
        # Stop the runtime first (it writes to the ledger), then the server (whose shutdown
        # closes the ledger).
        await asyncio.gather(running, return_exceptions=True)
        server.should_exit = True
        await asyncio.gather(serving, return_exceptions=True)
        stopped.cancel()
    _err.print("fleetgate up: stopped")
    return EXIT_OK


async def _serve(server: uvicorn.Server, sock: socket.socket) -> None:
    # uvicorn exits the process when its start-up fails; `up` reports that itself instead.
    with contextlib.suppress(SystemExit):
        await server.serve(sockets=[sock])


async def _started(server: uvicorn.Server, serving: asyncio.Task[None]) -> bool:
    while not server.started:  # uvicorn offers no event for "started"
        if serving.done():
            return False
        await asyncio.sleep(0.05)
    return True


def _banner(settings: Settings, port: int, plans: list[Any], speed: float) -> None:
    host = settings.api.host
    shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    shown = f"[{shown}]" if ":" in shown else shown
    base = f"http://{shown}:{port}"
    token = settings.api.admin_token
    day = format_duration(_real_day(speed))
    pools = ", ".join(f"{p.name} ({p.nodes} nodes, policy {p.policy.name})" for p in plans)
    _out.print(
        "[bold]fleetgate up[/bold]: API, reconciler and rotation controller on SQLite "
        f"({DATABASE}) and the fake cluster"
    )
    _out.print(f"  dashboard    {base}/?token={token}")
    _out.print(f"  what if      {base}/whatif?token={token}   (compare two policies)")
    _out.print(f"  API          {base}/v1   (OpenAPI docs: {base}/docs)")
    _out.print(f"  admin token  {token}")
    _out.print(f"  fleet        {pools}; tenants {', '.join(NAMESPACES)}; a claim for ci")
    _out.print(f"  time         virtual, {speed:g}x: a virtual day every {day}")
    _out.print("Press Ctrl-C to stop.")
    _out.file.flush()  # stdout is block-buffered when piped: whoever reads the URL needs it now


def _real_day(speed: float) -> timedelta:
    return timedelta(seconds=round(86_400 / speed))
