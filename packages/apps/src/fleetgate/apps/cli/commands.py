"""The commands that are no client of a running API: ``check`` and ``simulate`` (offline), the
servers (``api``, ``controller``, ``reconciler``, ``up``) and ``db``. Each reads its options and
hands over to the module that owns the feature, imported only when the command runs."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import click

from fleetgate.apps.cli.group import Group
from fleetgate.apps.cli.params import PATH, Integer, Number, OneOf, WritableFile, argument
from fleetgate.domain.rotation.constants import MAX_POOL_NODES


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


policy_arg = argument("policy", type=PATH, help="RotationPolicy manifest (YAML).")
format_option = click.option(
    "--format", "fmt", type=OneOf(OutputFormat), default=OutputFormat.table
)
report_output = click.option(
    "--output",
    "-o",
    type=OneOf(ReportOutput),
    default=None,
    show_default=False,
    help="table, wide, json, yaml or name; overrides --format.",
)


@click.command()
@policy_arg
@click.option("--expire-after", required=True, help="NodePool expireAfter.")
@click.option("--termination-grace-period", help="NodePool terminationGracePeriod.")
@click.option(
    "--nodes",
    type=Integer(min=0, max=MAX_POOL_NODES),
    default=0,
    help="NodeClaims in the pool (N).",
)
@format_option
@report_output
@click.option("--strict", is_flag=True, help="Exit 1 on a warning too (for CI).")
@click.option("--nodepool", type=PATH, help="NodePool manifest: lay its disruption budgets over.")
@click.option("--ledger", help="Ledger database URL: each pool's drain headroom.")
@click.option("--ledger-snapshot", type=PATH, help="Ledger snapshot file: the same, offline.")
def check(
    policy: Path,
    expire_after: str,
    termination_grace_period: str | None,
    nodes: int,
    fmt: OutputFormat,
    output: ReportOutput | None,
    strict: bool,
    nodepool: Path | None,
    ledger: str | None,
    ledger_snapshot: Path | None,
) -> None:
    """Derive whether the maintenance windows can rotate the pool before its forced expiry."""
    from fleetgate.apps.cli.checkreport import run_check

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
    raise click.exceptions.Exit(code)


@click.command()
@policy_arg
@click.option("--fleet", type=PATH, required=True, help="Fleet file (YAML).")
@click.option("--from", "start", required=True, help="Start instant (RFC3339).")
@click.option("--to", "end", required=True, help="End instant (RFC3339).")
@click.option("--env-provisioning", help="Actual provisioning time.")
@click.option("--env-drain", help="Actual drain time.")
@format_option
@click.option("--report", type=WritableFile(), help="Write an HTML report.")
@report_output
def simulate(
    policy: Path,
    fleet: Path,
    start: str,
    end: str,
    env_provisioning: str | None,
    env_drain: str | None,
    fmt: OutputFormat,
    report: Path | None,
    output: ReportOutput | None,
) -> None:
    """Play a policy out over a fleet in virtual time with the real controller."""
    from fleetgate.apps.simulate.command import run_simulate

    chosen = (output or fmt).value
    raise click.exceptions.Exit(
        run_simulate(policy, fleet, start, end, env_provisioning, env_drain, chosen, report)
    )


@click.command()
@click.option(
    "--host",
    show_default=False,
    help="Address to listen on. [default: the api.host setting, 127.0.0.1]",
)
@click.option(
    "--port",
    type=Integer(min=0, max=65535),
    show_default=False,
    help="TCP port (0: any free one). [default: the api.port setting, 8000]",
)
@click.option(
    "--workers",
    type=Integer(min=1, max=64),
    default=1,
    help="uvicorn worker processes sharing the port.",
)
def api(host: str | None, port: int | None, workers: int) -> None:
    """Serve the HTTP API (uvicorn)."""
    from fleetgate.apps.api.server import run_api

    raise click.exceptions.Exit(run_api(host, port, workers))


@click.command()
@click.option("--once", is_flag=True, help="Run one pass over every pool.")
def controller(once: bool) -> None:
    """Run the rotation controller."""
    from fleetgate.apps.controller.command import run_controller

    raise click.exceptions.Exit(run_controller(once))


@click.command()
@click.option("--once", is_flag=True, help="Run one pass and print its report.")
@click.option("--interval", type=Number(min=0.001), help="Seconds between passes.")
def reconciler(once: bool, interval: float | None) -> None:
    """Run the capacity reconciler (every 5 minutes by default)."""
    from fleetgate.apps.reconciler.command import run_reconciler

    raise click.exceptions.Exit(run_reconciler(once, interval))


@click.command()
@click.option("--policy", type=PATH, help="RotationPolicy manifest.")
@click.option("--nodes", type=Integer(min=1, max=10000), default=6)
@click.option("--speed", type=Number(min=1.0), default=600.0, help="Virtual seconds per second.")
@click.option("--port", type=Integer(min=0, max=65535), default=8000)
@click.option("--verbose", "-v", is_flag=True, help="Stream the controller's and reconciler's log.")
def up(policy: Path | None, nodes: int, speed: float, port: int, verbose: bool) -> None:
    """Run the whole system on SQLite and the fake cluster, with a dashboard."""
    from fleetgate.apps.up import run_up

    raise click.exceptions.Exit(run_up(policy, nodes, speed, port, verbose))


@click.group("db", cls=Group, no_args_is_help=True, help="Database schema management.")
def db_group() -> None:
    """Database schema management."""


@db_group.command("upgrade")
@argument("revision", default="head", help="Target revision.")
def db_upgrade(revision: str) -> None:
    """Migrate the configured database to REVISION (Alembic)."""
    from fleetgate.apps.cli.db import run_upgrade

    raise click.exceptions.Exit(run_upgrade(revision))


@db_group.command("current")
def db_current() -> None:
    """Print the revision the configured database is at (changes nothing)."""
    from fleetgate.apps.cli.db import run_current

    raise click.exceptions.Exit(run_current())


@db_group.command("history")
def db_history() -> None:
    """List the schema revisions this version ships, marking the database's current one."""
    from fleetgate.apps.cli.db import run_history

    raise click.exceptions.Exit(run_history())


#: The commands, in the order ``fleetgate --help`` shows them (``db`` is added after the
#: client's listings and writes).
COMMANDS = (check, simulate, api, controller, reconciler, up)
