"""``fleetgate nodes|placements|status|events``: read a running API.

Each command takes ``--server`` and ``--token`` (or ``FLEETGATE_SERVER`` / ``FLEETGATE_TOKEN``),
prints ``-o table|wide|json|yaml|name`` (``output``; ``--no-headers``) and polls with
``-w/--watch`` (``watch``). The writes are in ``verbs``; the exit codes in ``calls``.

The client (``api``: the standard library's HTTP and dataclasses of the wire format) loads when a
command runs; no command imports pydantic, httpx or the server (FastAPI).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from fleetgate.apps.cli.params import Integer
from fleetgate.apps.client import options, views
from fleetgate.apps.client.calls import EXIT_INVALID, call, fail, note, show
from fleetgate.apps.client.output import Output
from fleetgate.apps.client.watch import list_rows

if TYPE_CHECKING:
    from fleetgate.apps.client.api import FleetgateClient
    from fleetgate.apps.client.bodies import EventBody, NodeBody


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


@click.command("nodes")
@options.server
@options.token
@options.output
@click.option("--selector", "-l", help="Only nodes whose labels match (k=v,k!=v,k).")
@options.watch("Poll; print each node that appears, changes or goes.", interval=5.0)
def nodes_cmd(
    server: str,
    token: str | None,
    output: Output,
    no_headers: bool,
    selector: str | None,
    watch: bool,
    interval: float,
    watch_count: int,
) -> None:
    """List the ledger's nodes: pool, used/limit per dimension, load, schedulable."""
    empty = "No nodes in the ledger (add one with `fleetgate node put`)."
    if selector is not None:
        empty = f"No node matches -l {selector!r}."
    if watch:
        from fleetgate.apps.client.watch import Watch, watch_rows

        def fetch() -> list[NodeBody]:
            return select_nodes(call(server, token, lambda api: api.nodes()), selector)

        shown = Watch(output, views.NODES, not no_headers, empty)
        raise click.exceptions.Exit(
            watch_rows(fetch, lambda n: n.name, shown, interval, watch_count)
        )
    found = call(server, token, lambda api: api.nodes())
    chosen = select_nodes(found, selector)
    if selector is not None:
        empty = f"No node matches -l {selector!r} ({len(found)} in the ledger)."
    show(chosen, output, views.NODES, empty, not no_headers)


@click.command("placements")
@options.namespace
@options.server
@options.token
@options.output
@options.watch("Poll; print each placement that appears, changes or goes.", interval=5.0)
def placements_cmd(
    namespace: str,
    server: str,
    token: str | None,
    output: Output,
    no_headers: bool,
    watch: bool,
    interval: float,
    watch_count: int,
) -> None:
    """List a namespace's placements."""
    list_rows(lambda: call(server, token, lambda api: api.placements(namespace)), lambda p: p.id,
              views.PLACEMENTS, f"No placements in namespace {namespace}.", output,
              not no_headers, watch, interval, watch_count)  # fmt: skip


@click.command("status")
@options.server
@options.token
@options.output
@options.watch("Poll; print each pool again when its standing changes.", interval=5.0)
def status_cmd(
    server: str,
    token: str | None,
    output: Output,
    no_headers: bool,
    watch: bool,
    interval: float,
    watch_count: int,
) -> None:
    """Every NodePool: its policy, window, next window, A and G, the rotation, the gate."""
    empty = (
        "No NodePools in the cluster the API reads, so nothing to rotate (the fake cluster "
        "starts empty; `fleetgate up` runs one with pools, cluster: karpenter reads yours)."
    )
    if not watch:
        found = call(server, token, lambda api: api.rotation_status())
        show(found, output, views.STATUS, empty, not no_headers)
        return
    from fleetgate.apps.client.watch import Watch, watch_rows

    shown = Watch(output, views.STATUS, not no_headers, empty)
    code = watch_rows(lambda: call(server, token, lambda api: api.rotation_status()),
                      lambda p: p.pool, shown, interval, watch_count)  # fmt: skip
    raise click.exceptions.Exit(code)


@click.command("events")
@options.server
@options.token
@options.output
@options.only_namespace
@click.option("--kind", help="Only this kind.")
@click.option("--limit", type=Integer(min=1, max=1000), default=50)
@click.option("--oldest-first", is_flag=True, help="Oldest first (default: newest first).")
@options.watch("Print the newest, oldest first, then each new one.", interval=2.0)
def events_cmd(
    server: str,
    token: str | None,
    output: Output,
    no_headers: bool,
    namespace: str | None,
    kind: str | None,
    limit: int,
    oldest_first: bool,
    watch: bool,
    interval: float,
    watch_count: int,
) -> None:
    """List audit events, newest first."""
    if watch:
        from fleetgate.apps.client.watch import Watch, watch_events

        where = f" in namespace {namespace}" if namespace else ""
        shown = Watch(output, views.EVENTS, not no_headers, f"No events{where} yet.")
        code = watch_events(server, token, namespace, kind, limit, interval, watch_count,
                            shown)  # fmt: skip
        raise click.exceptions.Exit(code)

    def fetch(api: FleetgateClient) -> list[EventBody]:
        return api.events(
            namespace=namespace, kind=kind, limit=limit, newest_first=not oldest_first
        )

    found = call(server, token, fetch)
    if found or output in (Output.json, Output.yaml):
        show(found, output, views.EVENTS, "", not no_headers)
    else:
        note(events_empty(server, token, kind, namespace))


#: The listings, in the order ``fleetgate --help`` shows them.
COMMANDS = (nodes_cmd, placements_cmd, status_cmd, events_cmd)
