"""``fleetgate nodes|placements|claims|events|status``: read a running API, as tables or JSON.

Each command takes ``--server`` and ``--token`` (or ``FLEETGATE_SERVER`` / ``FLEETGATE_TOKEN``)
and prints a rich table, or ``--output json`` (the API's own bodies, one JSON array). Exit codes
follow the CLI's: 0 done, 1 the API refused or could not be reached, 2 invalid input.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Annotated, TypeVar

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from fleetgate.apps.api.routes.rotation_status import PoolRotationBody
from fleetgate.apps.api.schemas import ClaimBody, EventBody, NodeBody, PlacementSummary
from fleetgate.apps.client import (
    DEFAULT_SERVER,
    SERVER_ENV,
    TOKEN_ENV,
    ClientError,
    FleetgateClient,
)
from fleetgate.apps.redaction import error_markup

EXIT_OK, EXIT_FAILED = 0, 1
Row = TypeVar("Row", bound=BaseModel)

Server = Annotated[
    str, typer.Option("--server", envvar=SERVER_ENV, help="The API's base URL.", show_default=True)
]
Token = Annotated[
    str | None,
    typer.Option(
        "--token", envvar=TOKEN_ENV, help="Bearer token (admin or namespace).", show_default=False
    ),
]
NamespaceOpt = Annotated[str, typer.Option("--namespace", "-n", help="The namespace.")]


class Output(StrEnum):
    """How a listing is printed."""

    table = "table"
    json = "json"


OutputOpt = Annotated[Output, typer.Option("--output", "-o", help="table or json.")]
_out = Console()
_err = Console(stderr=True)


def _listing(
    server: str,
    token: str | None,
    output: Output,
    fetch: Callable[[FleetgateClient], Sequence[Row]],
    table: Callable[[Sequence[Row]], Table],
) -> int:
    """Fetch the rows from the API and print them; an API error (never the token) exits 1."""
    try:
        with FleetgateClient(server, token) as api:
            rows = fetch(api)
    except ClientError as exc:
        _err.print(error_markup(str(exc)), highlight=False)
        return EXIT_FAILED
    if output is Output.json:
        typer.echo(json.dumps([r.model_dump(mode="json") for r in rows], indent=2))
    else:
        _out.print(table(rows))
    return EXIT_OK


def _amount(used: int, limit: int) -> str:
    return f"{used}/{limit}"


def _nodes_table(found: Sequence[NodeBody]) -> Table:
    t = Table("NAME", "POOL", "CPUS", "MEMORY_MB", "DISK_GB", "LOAD", "DEMAND", "SCHEDULABLE",
              box=None)  # fmt: skip
    for n in found:
        t.add_row(
            n.name,
            n.pool or "-",
            _amount(n.used.cpus, n.limits.cpus),
            _amount(n.used.memory_mb, n.limits.memory_mb),
            _amount(n.used.disk_gb, n.limits.disk_gb),
            "-" if n.cpu_load_1 is None else f"{n.cpu_load_1:g}",
            f"{n.expected_demand:.2f}",
            "yes" if n.schedulable else "cordoned",
        )
    return t


def _placements_table(found: Sequence[PlacementSummary]) -> Table:
    t = Table("ID", "NODE", "CPUS", "MEMORY_MB", "DISK_GB", "REQUEST_ID", "ADMITTED", box=None)
    for p in found:
        t.add_row(p.id, p.node, str(p.cpus), str(p.memory_mb), str(p.disk_gb),
                  p.request_id or "-", p.admitted_at.isoformat())  # fmt: skip
    return t


def _claims_table(found: Sequence[ClaimBody]) -> Table:
    t = Table("ID", "STATE", "CPUS", "MEMORY_MB", "DISK_GB", "EXPIRES", box=None)
    for c in found:
        used = c.used
        t.add_row(c.id, c.state, _amount(used.cpus, c.cpus), _amount(used.memory_mb, c.memory_mb),
                  _amount(used.disk_gb, c.disk_gb), c.expires_at.isoformat())  # fmt: skip
    return t


def _events_table(found: Sequence[EventBody]) -> Table:
    t = Table("ID", "AT", "LEVEL", "NAMESPACE", "KIND", "SUBJECT", box=None)
    for e in found:
        t.add_row(str(e.id), e.at.isoformat(), e.level, e.namespace or "-", e.kind, e.subject)
    return t


def _when(at: datetime | None) -> str:
    return "-" if at is None else at.strftime("%Y-%m-%d %H:%M %Z")


def _status_table(found: Sequence[PoolRotationBody]) -> Table:
    t = Table("POOL", "POLICY", "NODES", "WINDOW", "NEXT WINDOW", "A", "G", "ROTATING", "REASON",
              box=None)  # fmt: skip
    for p in found:
        policy = p.policy or p.governance
        window = "open" if p.window_open else "closed"
        g = "-" if p.guaranteed_chances is None else str(p.guaranteed_chances)
        t.add_row(p.pool, policy, str(p.nodes), window, _when(p.next_window_start),
                  p.age_threshold or "-", g, p.rotating or "-", p.reason or "-")  # fmt: skip
    return t


def register(app: typer.Typer) -> None:
    """Add the client subcommands to the ``fleetgate`` command."""

    @app.command("nodes")
    def nodes_cmd(
        server: Server = DEFAULT_SERVER, token: Token = None, output: OutputOpt = Output.table
    ) -> None:
        """List the ledger's nodes: pool, used/limit per dimension, load, schedulable."""
        raise typer.Exit(_listing(server, token, output, FleetgateClient.nodes, _nodes_table))

    @app.command("placements")
    def placements_cmd(
        namespace: NamespaceOpt,
        server: Server = DEFAULT_SERVER,
        token: Token = None,
        output: OutputOpt = Output.table,
    ) -> None:
        """List a namespace's placements."""
        raise typer.Exit(
            _listing(
                server, token, output, lambda api: api.placements(namespace), _placements_table
            )
        )

    @app.command("claims")
    def claims_cmd(
        namespace: NamespaceOpt,
        server: Server = DEFAULT_SERVER,
        token: Token = None,
        output: OutputOpt = Output.table,
    ) -> None:
        """List a namespace's capacity claims: used/limit per dimension, state, expiry."""
        raise typer.Exit(
            _listing(server, token, output, lambda api: api.claims(namespace), _claims_table)
        )

    @app.command("status")
    def status_cmd(
        server: Server = DEFAULT_SERVER, token: Token = None, output: OutputOpt = Output.table
    ) -> None:
        """Every NodePool: its policy, window, next window, A and G, the rotation, the gate."""
        fetch = FleetgateClient.rotation_status
        raise typer.Exit(_listing(server, token, output, fetch, _status_table))

    @app.command("events")
    def events_cmd(
        server: Server = DEFAULT_SERVER,
        token: Token = None,
        output: OutputOpt = Output.table,
        namespace: Annotated[
            str | None, typer.Option("--namespace", "-n", help="Only this namespace.")
        ] = None,
        kind: Annotated[str | None, typer.Option("--kind", help="Only this kind.")] = None,
        limit: Annotated[int, typer.Option("--limit", min=1, max=1000)] = 50,
        oldest_first: Annotated[
            bool, typer.Option("--oldest-first", help="Oldest first (default: newest first).")
        ] = False,
    ) -> None:
        """List audit events, newest first."""

        def fetch(api: FleetgateClient) -> list[EventBody]:
            return api.events(
                namespace=namespace, kind=kind, limit=limit, newest_first=not oldest_first
            )

        raise typer.Exit(_listing(server, token, output, fetch, _events_table))
