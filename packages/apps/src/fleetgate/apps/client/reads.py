"""``fleetgate nodes|placements|claims|events|status``: read a running API.

Each command takes ``--server`` and ``--token`` (or ``FLEETGATE_SERVER`` / ``FLEETGATE_TOKEN``)
and prints ``-o table|wide|json|yaml|name`` (``clientoutput``). The writes are in
``clientverbs``; the polling of ``--watch`` in ``clientwatch``. Exit codes (docs/api.md):

* 0 done;
* 1 the API refused (401, 403, 404, 409, 507, ...);
* 2 invalid input: an option the CLI refuses, or the API's 422;
* 3 the API could not be reached or is unavailable (502, 503, 504): worth retrying.

The client (``client``: the standard library's HTTP and dataclasses of the wire format) loads
when a command runs; no command imports pydantic, httpx or the server (FastAPI). A write sends
its request as the options give it: the API is the one judge of a body (its 422 names the field,
exit 2, and changes nothing), so every entry point gets the same answer from the same rule.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from fleetgate.apps import clientviews as views
from fleetgate.apps.clientdefaults import DEFAULT_SERVER, SERVER_ENV, TOKEN_ENV
from fleetgate.apps.clientoutput import OUTPUT_HELP, Body, Output, View, render

if TYPE_CHECKING:
    from fleetgate.apps.client import FleetgateClient
    from fleetgate.apps.clientbodies import EventBody, NodeBody

EXIT_OK, EXIT_REFUSED, EXIT_INVALID, EXIT_UNAVAILABLE = 0, 1, 2, 3
#: Answers that say "try again later" rather than "no".
UNAVAILABLE = frozenset({502, 503, 504})
T = TypeVar("T")

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
OutputOpt = Annotated[Output, typer.Option("--output", "-o", help=OUTPUT_HELP)]
#: How many polls ``--watch`` makes before it stops: for scripts, and for tests (bound by count).
WatchCount = Annotated[
    int, typer.Option("--watch-count", min=0, help="With --watch: stop after N polls (0: Ctrl-C).")
]
Interval = Annotated[
    float, typer.Option("--interval", min=0.0, max=3600.0, help="Seconds between polls.")
]


def fail(message: str, code: int) -> typer.Exit:
    """Print ``error: message`` as one line on stderr, credentials masked; the exit to raise."""
    from fleetgate.apps.redaction import redact

    print(f"error: {redact(' '.join(message.split()))}", file=sys.stderr)
    return typer.Exit(code)


def note(message: str) -> None:
    """Say why an answer is empty (stderr, as kubectl's "No resources found")."""
    print(message, file=sys.stderr)


def exit_code(status: int | None) -> int:
    """The exit code for an API error answer (None: no answer at all)."""
    if status is None or status in UNAVAILABLE:
        return EXIT_UNAVAILABLE
    return EXIT_INVALID if status == 422 else EXIT_REFUSED


def call(server: str, token: str | None, action: Callable[[FleetgateClient], T]) -> T:
    """Run ``action`` against the API; its error (never the token) is one line and an exit."""
    from fleetgate.apps.client import ClientError, FleetgateClient

    try:
        with FleetgateClient(server, token) as api:
            return action(api)
    except ClientError as exc:
        raise fail(str(exc), exit_code(exc.status)) from None


def request(**fields: Any) -> dict[str, Any]:
    """A request body from options, leaving out those not given (the API's defaults apply).

    It is not checked here: checking it with the API's pydantic schema cost a write more start-up
    than the whole of a read (docs/performance.md, CLI start-up), and the API's 422 already names
    the field as sent; ``call`` prints it on one line with exit 2.
    """
    return {k: v for k, v in fields.items() if v is not None}


def show(rows: Sequence[Body], output: Output, view: View, empty: str) -> None:
    """Print ``rows``; for people (table, wide) an empty answer says why instead."""
    text = render(rows, output, view)
    if text:
        typer.echo(text)
    elif output in (Output.table, Output.wide):
        note(empty)


def select_nodes(found: list[NodeBody], selector: str | None) -> list[NodeBody]:
    """The nodes whose labels match the ``-l`` selector (all without one)."""
    if selector is None:
        return found
    from fleetgate.domain.rotation.labelselector import parse_selector

    try:
        chosen = parse_selector(selector)
    except ValueError as exc:
        raise fail(f"-l: {exc}", EXIT_INVALID) from None
    return [n for n in found if chosen.matches(n.labels)]


def events_empty(server: str, token: str | None, kind: str | None, namespace: str | None) -> str:
    """Why no event was listed: for an unknown ``--kind``, the kinds the trail does hold."""
    where = f" in namespace {namespace}" if namespace else ""
    if kind is None:
        return f"No events{where}."
    recent = call(server, token, lambda api: api.events(namespace=namespace, limit=1000,
                                                         newest_first=True))  # fmt: skip
    kinds = sorted({e.kind for e in recent})
    seen = "; ".join(kinds) if kinds else "none"
    return f"No events of kind {kind!r}{where}. Kinds among the newest 1000 events: {seen}."


def register(app: typer.Typer) -> None:
    """Add the client subcommands to the ``fleetgate`` command."""

    @app.command("nodes")
    def nodes_cmd(
        server: Server = DEFAULT_SERVER,
        token: Token = None,
        output: OutputOpt = Output.table,
        selector: Annotated[
            str | None,
            typer.Option("--selector", "-l", help="Only nodes whose labels match (k=v,k!=v,k)."),
        ] = None,
    ) -> None:
        """List the ledger's nodes: pool, used/limit per dimension, load, schedulable."""
        found = call(server, token, lambda api: api.nodes())
        chosen = select_nodes(found, selector)
        empty = "No nodes in the ledger (add one with `fleetgate node put`)."
        if selector is not None:
            empty = f"No node matches -l {selector!r} ({len(found)} in the ledger)."
        show(chosen, output, views.NODES, empty)

    @app.command("placements")
    def placements_cmd(
        namespace: NamespaceOpt,
        server: Server = DEFAULT_SERVER,
        token: Token = None,
        output: OutputOpt = Output.table,
    ) -> None:
        """List a namespace's placements."""
        found = call(server, token, lambda api: api.placements(namespace))
        show(found, output, views.PLACEMENTS, f"No placements in namespace {namespace}.")

    @app.command("status")
    def status_cmd(
        server: Server = DEFAULT_SERVER,
        token: Token = None,
        output: OutputOpt = Output.table,
        watch: Annotated[
            bool, typer.Option("--watch", "-w", help="Poll; print again when it changes.")
        ] = False,
        interval: Interval = 5.0,
        watch_count: WatchCount = 0,
    ) -> None:
        """Every NodePool: its policy, window, next window, A and G, the rotation, the gate."""
        empty = (
            "No NodePools in the cluster the API reads, so nothing to rotate (the fake cluster "
            "starts empty; `fleetgate up` runs one with pools, cluster: karpenter reads yours)."
        )
        if not watch:
            found = call(server, token, lambda api: api.rotation_status())
            show(found, output, views.STATUS, empty)
            return
        from fleetgate.apps.clientwatch import watch_status

        raise typer.Exit(watch_status(server, token, output, interval, watch_count, empty))

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
        watch: Annotated[
            bool,
            typer.Option("--watch", "-w", help="Print the newest, oldest first, then new ones."),
        ] = False,
        interval: Interval = 2.0,
        watch_count: WatchCount = 0,
    ) -> None:
        """List audit events, newest first."""
        if watch:
            from fleetgate.apps.clientwatch import watch_events

            code = watch_events(server, token, output, namespace, kind, limit, interval,
                                watch_count)  # fmt: skip
            raise typer.Exit(code)

        def fetch(api: FleetgateClient) -> list[EventBody]:
            return api.events(
                namespace=namespace, kind=kind, limit=limit, newest_first=not oldest_first
            )

        found = call(server, token, fetch)
        if found or output not in (Output.table, Output.wide):
            show(found, output, views.EVENTS, "")
        else:
            note(events_empty(server, token, kind, namespace))

    from fleetgate.apps.clientverbs import register_verbs

    register_verbs(app)
