"""The client's writes: ``place``, ``release``, ``claims create|update|delete``,
``node get|put|delete|cordon|uncordon`` and ``tokens create|list|revoke``.

Shapes follow kubectl and openstack: the verb's subject is positional (``fleetgate release NS
ID``, ``fleetgate node cordon NAME``), sizes are options named as the API names its fields. A
request is sent as the options give it and the API judges it (bad input: its 422 naming the
field, exit 2); an answer is printed with ``-o`` like every listing; the exit codes are
``clientcli``'s.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Annotated

import typer

from fleetgate.apps import clientviews as views
from fleetgate.apps.clientcli import (
    EXIT_INVALID,
    EXIT_OK,
    NamespaceOpt,
    OutputOpt,
    Server,
    Token,
    call,
    fail,
    request,
    show,
)
from fleetgate.apps.clientdefaults import DEFAULT_SERVER
from fleetgate.apps.clientoutput import Body, Output, View, render_one
from fleetgate.apps.cligroups import Group

if TYPE_CHECKING:
    from fleetgate.apps.client import FleetgateClient

NamespaceArg = Annotated[str, typer.Argument(help="The namespace.", show_default=False)]
Cpus = Annotated[int, typer.Option("--cpus", "--cpu", help="CPUs.", show_default=False)]
MemoryMb = Annotated[int, typer.Option("--memory-mb", help="Memory, MiB.", show_default=False)]
DiskGb = Annotated[int, typer.Option("--disk-gb", help="Disk, GB.")]
ExpiresIn = Annotated[
    str | None,
    typer.Option("--expires-in", help="When the claim ends, from now (e.g. 8h, 14d)."),
]
ExpiresAt = Annotated[
    str | None,
    typer.Option("--expires-at", help="When the claim ends: an RFC3339 instant with its offset."),
]

claims_app = typer.Typer(
    help="A namespace's capacity claims: list (no subcommand), create, update, delete.",
    invoke_without_command=True,
    rich_markup_mode=None,
    cls=Group,
)
node_app = typer.Typer(
    help="One node of the ledger: get, put, delete, cordon, uncordon (admin token).",
    no_args_is_help=True,
    rich_markup_mode=None,
    cls=Group,
)
tokens_app = typer.Typer(
    help="A namespace's API tokens: create (the secret is shown once), list, revoke (admin).",
    no_args_is_help=True,
    rich_markup_mode=None,
    cls=Group,
)


def _print_one(row: Body, output: Output, view: View) -> None:
    typer.echo(render_one(row, output, view))


def _seconds(expires_in: str | None) -> int | None:
    """``--expires-in`` as whole seconds (the domain reads the duration)."""
    if expires_in is None:
        return None
    from fleetgate.domain.durations import DurationError, parse_duration

    try:
        return int(parse_duration(expires_in).total_seconds())
    except DurationError as exc:
        raise fail(f"--expires-in: {exc}", EXIT_INVALID) from None


# --- placements ---------------------------------------------------------------------------------


def place(
    namespace: NamespaceArg,
    cpus: Cpus,
    memory_mb: MemoryMb,
    disk_gb: DiskGb = 0,
    node: Annotated[str | None, typer.Option("--node", help="Force this node.")] = None,
    pool: Annotated[str | None, typer.Option("--pool", help="Only nodes of this pool.")] = None,
    request_id: Annotated[
        str | None, typer.Option("--request-id", help="Idempotency key: a retry is answered once.")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say where it would land; place nothing.")
    ] = False,
    server: Server = DEFAULT_SERVER,
    token: Token = None,
    output: OutputOpt = Output.table,
) -> None:
    """Admit a placement in NAMESPACE (507 with the per-dimension refusal when nothing fits)."""
    body = request(cpus=cpus, memory_mb=memory_mb, disk_gb=disk_gb, node=node,
                   pool=pool, request_id=request_id)  # fmt: skip
    if dry_run:
        _print_one(call(server, token, lambda api: api.dry_run(namespace, body)), output,
                   views.DRY_RUN)  # fmt: skip
    else:
        _print_one(call(server, token, lambda api: api.place(namespace, body)), output,
                   views.PLACEMENTS)  # fmt: skip


def release(
    namespace: NamespaceArg,
    placement_ids: Annotated[list[str], typer.Argument(help="Placement ids.", show_default=False)],
    server: Server = DEFAULT_SERVER,
    token: Token = None,
) -> None:
    """Release placements of NAMESPACE; each id is tried, the first failure's code is the exit."""
    code = EXIT_OK
    for placement_id in placement_ids:
        try:
            call(server, token, partial(_release, namespace, placement_id))
        except typer.Exit as exc:
            code = code or exc.exit_code
            continue
        typer.echo(f"placement {placement_id} released")
    raise typer.Exit(code)


def _release(namespace: str, placement_id: str, api: FleetgateClient) -> None:
    api.release(namespace, placement_id)


# --- claims -------------------------------------------------------------------------------------


@claims_app.callback()
def claims_list(
    ctx: typer.Context,
    namespace: Annotated[
        str | None, typer.Option("--namespace", "-n", help="The namespace to list.")
    ] = None,
    server: Server = DEFAULT_SERVER,
    token: Token = None,
    output: OutputOpt = Output.table,
) -> None:
    """List a namespace's capacity claims: used/limit per dimension, state, expiry."""
    if ctx.invoked_subcommand is not None:
        return
    if namespace is None:
        raise fail("--namespace: give the namespace whose claims to list (-n NS)", EXIT_INVALID)
    found = call(server, token, lambda api: api.claims(namespace))
    show(found, output, views.CLAIMS, f"No claims in namespace {namespace}.")


@claims_app.command("create")
def claims_create(
    namespace: NamespaceArg,
    cpus: Cpus,
    memory_mb: MemoryMb,
    disk_gb: DiskGb = 0,
    expires_in: ExpiresIn = None,
    expires_at: ExpiresAt = None,
    server: Server = DEFAULT_SERVER,
    token: Token = None,
    output: OutputOpt = Output.table,
) -> None:
    """Reserve capacity for NAMESPACE until --expires-in or --expires-at (exactly one)."""
    body = request(cpus=cpus, memory_mb=memory_mb, disk_gb=disk_gb,
                   expires_in_seconds=_seconds(expires_in), expires_at=expires_at)  # fmt: skip
    _print_one(call(server, token, lambda api: api.create_claim(namespace, body)), output,
               views.CLAIMS)  # fmt: skip


@claims_app.command("update")
def claims_update(
    namespace: NamespaceArg,
    claim_id: Annotated[str, typer.Argument(help="The claim's id.", show_default=False)],
    cpus: Annotated[int | None, typer.Option("--cpus", "--cpu", help="New CPU limit.")] = None,
    memory_mb: Annotated[int | None, typer.Option("--memory-mb", help="New memory limit.")] = None,
    disk_gb: Annotated[int | None, typer.Option("--disk-gb", help="New disk limit.")] = None,
    expires_in: ExpiresIn = None,
    expires_at: ExpiresAt = None,
    server: Server = DEFAULT_SERVER,
    token: Token = None,
    output: OutputOpt = Output.table,
) -> None:
    """Change only the limits and expiry given: grow (an admission), shrink, re-date."""
    body = request(cpus=cpus, memory_mb=memory_mb, disk_gb=disk_gb,
                   expires_in_seconds=_seconds(expires_in), expires_at=expires_at)  # fmt: skip
    _print_one(call(server, token, lambda api: api.update_claim(namespace, claim_id, body)),
               output, views.CLAIMS)  # fmt: skip


@claims_app.command("delete")
def claims_delete(
    namespace: NamespaceArg,
    claim_id: Annotated[str, typer.Argument(help="The claim's id.", show_default=False)],
    server: Server = DEFAULT_SERVER,
    token: Token = None,
) -> None:
    """Delete a claim: its namespace's usage goes back to the unclaimed side."""
    call(server, token, lambda api: api.delete_claim(namespace, claim_id))
    typer.echo(f"claim {claim_id} deleted")


# --- nodes --------------------------------------------------------------------------------------

NameArg = Annotated[str, typer.Argument(help="The node's name.", show_default=False)]


@node_app.command("get")
def node_get(
    name: NameArg,
    server: Server = DEFAULT_SERVER,
    token: Token = None,
    output: OutputOpt = Output.table,
) -> None:
    """Show one node."""
    _print_one(call(server, token, lambda api: api.node(name)), output, views.NODES)


@node_app.command("put")
def node_put(
    name: NameArg,
    threads: Annotated[int, typer.Option("--threads", help="CPU threads.", show_default=False)],
    memory_mb: MemoryMb,
    disk_gb: Annotated[int, typer.Option("--disk-gb", help="Disk, GB.", show_default=False)],
    pool: Annotated[str, typer.Option("--pool", help="The node's pool.")] = "",
    label: Annotated[
        list[str] | None, typer.Option("--label", help="A label KEY=VALUE (repeatable).")
    ] = None,
    server: Server = DEFAULT_SERVER,
    token: Token = None,
    output: OutputOpt = Output.table,
) -> None:
    """Add the node, or replace its capacity, pool and labels (its counters are kept)."""
    labels: dict[str, str] = {}
    for item in label or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise fail(f"--label: {item!r} is not KEY=VALUE", EXIT_INVALID)
        labels[key] = value
    body = request(threads=threads, memory_mb=memory_mb, disk_gb=disk_gb, pool=pool,
                   labels=labels)  # fmt: skip
    _print_one(call(server, token, lambda api: api.put_node(name, body)), output, views.NODES)


@node_app.command("delete")
def node_delete(name: NameArg, server: Server = DEFAULT_SERVER, token: Token = None) -> None:
    """Remove the node (refused, 409 node_busy, while it holds placements)."""
    call(server, token, lambda api: api.delete_node(name))
    typer.echo(f"node {name} deleted")


@node_app.command("cordon")
def node_cordon(
    name: NameArg,
    server: Server = DEFAULT_SERVER,
    token: Token = None,
    output: OutputOpt = Output.table,
) -> None:
    """Stop admitting onto the node (its placements stay)."""
    _print_one(call(server, token, lambda api: api.cordon(name)), output, views.NODES)


@node_app.command("uncordon")
def node_uncordon(
    name: NameArg,
    server: Server = DEFAULT_SERVER,
    token: Token = None,
    output: OutputOpt = Output.table,
) -> None:
    """Admit onto the node again."""
    _print_one(call(server, token, lambda api: api.uncordon(name)), output, views.NODES)


# --- tokens -------------------------------------------------------------------------------------


@tokens_app.command("create")
def tokens_create(
    namespace: NamespaceArg,
    server: Server = DEFAULT_SERVER,
    token: Token = None,
    output: OutputOpt = Output.table,
) -> None:
    """Make a token for NAMESPACE; its secret is printed this once (-o name: the id only)."""
    _print_one(call(server, token, lambda api: api.create_token(namespace)), output,
               views.NEW_TOKEN)  # fmt: skip


@tokens_app.command("list")
def tokens_list(
    namespace: NamespaceArg,
    server: Server = DEFAULT_SERVER,
    token: Token = None,
    output: OutputOpt = Output.table,
) -> None:
    """List NAMESPACE's tokens, revoked ones included (never their secrets)."""
    found = call(server, token, lambda api: api.tokens(namespace))
    show(found, output, views.TOKENS, f"No tokens for namespace {namespace}.")


@tokens_app.command("revoke")
def tokens_revoke(
    namespace: NamespaceArg,
    token_id: Annotated[str, typer.Argument(help="The token's id.", show_default=False)],
    server: Server = DEFAULT_SERVER,
    token: Token = None,
) -> None:
    """Revoke a token: it stops authenticating at once."""
    call(server, token, lambda api: api.revoke_token(namespace, token_id))
    typer.echo(f"token {token_id} revoked")


def register_verbs(app: typer.Typer) -> None:
    """Add the write commands (and the ``claims`` group, whose bare form lists) to ``app``."""
    app.command("place")(place)
    app.command("release")(release)
    app.add_typer(claims_app, name="claims")
    app.add_typer(node_app, name="node")
    app.add_typer(tokens_app, name="tokens")


__all__ = ["NamespaceOpt", "register_verbs"]
