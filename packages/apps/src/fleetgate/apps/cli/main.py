"""The ``fleetgate`` command. Each subcommand parses its arguments here and hands over to the
module that owns the feature; wiring happens in the composition root, never here.

Exit codes: 0 success, 1 the job ran and found a problem (e.g. a fatal finding) or the command
could not start (one ``error:`` line; ``--debug`` shows the traceback), 2 invalid input.
"""

from __future__ import annotations

import os
import sys
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fleetgate.apps.cligroups import Group

if TYPE_CHECKING:
    from rich.console import Console

app = typer.Typer(
    name="fleetgate",
    help="Guarded capacity admission and maintenance-window node rotation.",
    no_args_is_help=True,
    # --install-completion / --show-completion SHELL (docs/getting-started.md).
    add_completion=True,
    pretty_exceptions_enable=False,
    # Plain click help: no `<bool>` type column, option names never cut at 80 columns.
    rich_markup_mode=None,
    # Option values without pydantic where typer's adapter is not needed (clicoerce.py).
    cls=Group,
)
db_app = typer.Typer(
    help="Database schema management.", no_args_is_help=True, rich_markup_mode=None, cls=Group
)
app.add_typer(db_app, name="db")


@cache
def _stderr() -> Console:
    from rich.console import Console

    return Console(stderr=True)


class _Stderr:
    """rich's stderr console, made on first use: a client command that prints no error never
    imports rich (docs/performance.md, CLI start-up)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_stderr(), name)


err: Console = _Stderr()  # type: ignore[assignment]


class OutputFormat(StrEnum):
    """How a report is printed (``--format``; ``-o`` takes the client commands' wider set)."""

    table = "table"
    json = "json"


class ReportOutput(StrEnum):
    """``-o`` on check and simulate, as on the client commands (``name``: the finding codes)."""

    table = "table"
    wide = "wide"
    json = "json"
    yaml = "yaml"
    name = "name"


ReportOutputOpt = Annotated[
    ReportOutput | None,
    typer.Option("--output", "-o", help="table, wide, json, yaml or name; overrides --format."),
]


def fail_input(message: str) -> typer.Exit:
    """Print an invalid-input message and return the exit (code 2) to raise."""
    from fleetgate.apps.redaction import error_markup

    err.print(error_markup(message), highlight=False)
    return typer.Exit(2)


#: Set by the root ``--debug`` flag: start-up failures then show their traceback.
_debug = False


def _installed_version() -> str:
    """The installed fleetgate distribution's version."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fleetgate")
    except PackageNotFoundError:  # running from a source tree without metadata
        return "0+unknown"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"fleetgate {_installed_version()}")
        raise typer.Exit()


@app.callback()
def _root(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print the installed fleetgate version and exit.",
            callback=_print_version,
            is_eager=True,
        ),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug",
            help="Show the traceback when a command fails to start (also after the command).",
        ),
    ] = False,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="YAML configuration file (FLEETGATE_CONFIG).",
            exists=True,
            dir_okay=False,
        ),
    ] = None,
) -> None:
    global _debug
    _debug = debug
    if config is not None:
        os.environ["FLEETGATE_CONFIG"] = str(config)


@app.command("version")
def version_cmd() -> None:
    """Print the installed fleetgate version."""
    typer.echo(f"fleetgate {_installed_version()}")


@app.command()
def check(
    policy: Annotated[Path, typer.Argument(help="RotationPolicy manifest (YAML).")],
    expire_after: Annotated[str, typer.Option("--expire-after", help="NodePool expireAfter.")],
    termination_grace_period: Annotated[
        str | None,
        typer.Option("--termination-grace-period", help="NodePool terminationGracePeriod."),
    ] = None,
    nodes: Annotated[int, typer.Option("--nodes", min=0, help="NodeClaims in the pool (N).")] = 0,
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
    output: ReportOutputOpt = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 1 on a warning too (for CI).")
    ] = False,
    nodepool: Annotated[
        Path | None,
        typer.Option("--nodepool", help="NodePool manifest: lay its disruption budgets over."),
    ] = None,
    ledger: Annotated[
        str | None,
        typer.Option("--ledger", help="Ledger database URL: each pool's drain headroom."),
    ] = None,
    ledger_snapshot: Annotated[
        Path | None,
        typer.Option("--ledger-snapshot", help="Ledger snapshot file: the same, offline."),
    ] = None,
) -> None:
    """Derive whether the maintenance windows can rotate the pool before its forced expiry."""
    from fleetgate.apps.check import run_check

    chosen = (output or fmt).value
    forecast = None
    if ledger is not None or ledger_snapshot is not None:  # only then the capacity domain loads
        from fleetgate.apps.ledgerforecast import source

        forecast = source(ledger, ledger_snapshot)
    code = run_check(
        policy,
        expire_after,
        termination_grace_period,
        nodes,
        chosen,
        strict,
        nodepool,
        ledger=forecast,
    )
    raise typer.Exit(code)


@app.command()
def simulate(
    policy: Annotated[Path, typer.Argument(help="RotationPolicy manifest (YAML).")],
    fleet: Annotated[Path, typer.Option("--fleet", help="Fleet file (YAML).")],
    start: Annotated[str, typer.Option("--from", help="Start instant (RFC3339).")],
    end: Annotated[str, typer.Option("--to", help="End instant (RFC3339).")],
    env_provisioning: Annotated[
        str | None, typer.Option("--env-provisioning", help="Actual provisioning time.")
    ] = None,
    env_drain: Annotated[str | None, typer.Option("--env-drain", help="Actual drain time.")] = None,
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
    report: Annotated[Path | None, typer.Option("--report", help="Write an HTML report.")] = None,
    output: ReportOutputOpt = None,
) -> None:
    """Play a policy out over a fleet in virtual time with the real controller."""
    from fleetgate.apps.simulate.command import run_simulate

    chosen = (output or fmt).value
    raise typer.Exit(
        run_simulate(policy, fleet, start, end, env_provisioning, env_drain, chosen, report)
    )


@app.command()
def api(
    host: Annotated[
        str | None,
        typer.Option(
            "--host",
            help="Address to listen on. [default: the api.host setting, 127.0.0.1]",
            show_default=False,
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            "--port",
            min=0,
            max=65535,
            help="TCP port (0: any free one). [default: the api.port setting, 8000]",
            show_default=False,
        ),
    ] = None,
    workers: Annotated[
        int,
        typer.Option("--workers", min=1, max=64, help="uvicorn worker processes sharing the port."),
    ] = 1,
) -> None:
    """Serve the HTTP API (uvicorn)."""
    from fleetgate.apps.api.server import run_api

    raise typer.Exit(run_api(host, port, workers))


@app.command()
def controller(
    once: Annotated[bool, typer.Option("--once", help="Run one pass over every pool.")] = False,
) -> None:
    """Run the rotation controller."""
    from fleetgate.apps.controller.command import run_controller

    raise typer.Exit(run_controller(once))


@app.command()
def reconciler(
    once: Annotated[
        bool, typer.Option("--once", help="Run one pass and print its report.")
    ] = False,
    interval: Annotated[
        float | None, typer.Option("--interval", min=0.001, help="Seconds between passes.")
    ] = None,
) -> None:
    """Run the capacity reconciler (every 5 minutes by default)."""
    from fleetgate.apps.reconciler.command import run_reconciler

    raise typer.Exit(run_reconciler(once, interval))


@app.command()
def up(
    policy: Annotated[
        Path | None, typer.Option("--policy", help="RotationPolicy manifest.")
    ] = None,
    nodes: Annotated[int, typer.Option("--nodes", min=1, max=10000)] = 6,
    speed: Annotated[
        float, typer.Option("--speed", min=1.0, help="Virtual seconds per second.")
    ] = 600.0,
    port: Annotated[int, typer.Option("--port", min=0, max=65535)] = 8000,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Stream the controller's and reconciler's log.")
    ] = False,
) -> None:
    """Run the whole system on SQLite and the fake cluster, with a dashboard."""
    from fleetgate.apps.up import run_up

    raise typer.Exit(run_up(policy, nodes, speed, port, verbose))


@db_app.command("upgrade")
def db_upgrade(
    revision: Annotated[str, typer.Argument(help="Target revision.")] = "head",
) -> None:
    """Migrate the configured database to REVISION (Alembic)."""
    from fleetgate.apps.dbcommand import run_upgrade

    raise typer.Exit(run_upgrade(revision))


@db_app.command("current")
def db_current() -> None:
    """Print the revision the configured database is at (changes nothing)."""
    from fleetgate.apps.dbcommand import run_current

    raise typer.Exit(run_current())


@db_app.command("history")
def db_history() -> None:
    """List the schema revisions this version ships, marking the database's current one."""
    from fleetgate.apps.dbcommand import run_history

    raise typer.Exit(run_history())


def _register_client_commands() -> None:
    # ``fleetgate nodes|placements|claims|events|status`` and the writes (place, release, claims,
    # node, tokens): a client of a running API (clientcli.py, clientverbs.py). Registering them
    # imports typer only; the client's own imports wait until a command runs.
    from fleetgate.apps.clientcli import register

    register(app)


_register_client_commands()


def main() -> None:
    """Entry point of the ``fleetgate`` console script."""
    try:
        app(args=debug_first(sys.argv[1:]))
    except Exception as exc:  # a start-up failure nobody handled: one line, not a traceback
        if _debug:
            raise
        raise SystemExit(startup_failure(exc)) from None


def debug_first(args: list[str]) -> list[str]:
    """``args`` with a ``--debug`` given after the command moved before it, where the root
    option reads it (``fleetgate api --debug`` is what people type)."""
    end = args.index("--") if "--" in args else len(args)
    if "--debug" not in args[:end]:
        return args
    return ["--debug", *(a for a in args[:end] if a != "--debug"), *args[end:]]


def startup_failure(exc: BaseException) -> int:
    """Print ``error: ...`` (one line, any credential hidden); the exit status (1)."""
    from fleetgate.apps.redaction import error_markup

    message = " ".join(str(exc).split()) or type(exc).__name__
    err.print(
        f"{error_markup(message)} (rerun with --debug for the traceback)",
        highlight=False,
        soft_wrap=True,
    )
    return 1
