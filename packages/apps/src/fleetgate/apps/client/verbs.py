"""The client's writes: ``place``, ``release``, ``claims create|update|delete``,
``node get|put|delete|cordon|uncordon`` and ``tokens create|list|revoke``.

Shapes follow kubectl: the namespace is ``-n/--namespace`` (the old first-argument form still
works, with a deprecation note), the verb's subject is positional (``fleetgate release -n NS
ID``, ``fleetgate node cordon NAME``), sizes are options named as the API names its fields. A
request is sent as the options give it and the API judges it (bad input: its 422 naming the
field, exit 2); every verb prints its answer with ``-o`` like every listing (a verb whose answer
is empty, such as a release, prints what it did: a line, the id with ``-o name``, an object with
``-o json``); the exit codes are ``calls``'.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import click

from fleetgate.apps.cli.group import Group
from fleetgate.apps.cli.params import Integer, argument
from fleetgate.apps.client import options, views
from fleetgate.apps.client.calls import (
    EXIT_INVALID,
    EXIT_OK,
    call,
    fail,
    request,
    show_one,
)
from fleetgate.apps.client.output import Output, dump_yaml
from fleetgate.apps.client.watch import list_rows

if TYPE_CHECKING:
    from fleetgate.apps.client.api import FleetgateClient

F = TypeVar("F", bound=Callable[..., Any])

cpus = click.option("--cpus", "--cpu", type=Integer(), required=True, show_default=False,
                    help="CPUs.")  # fmt: skip
memory_mb = click.option("--memory-mb", type=Integer(), required=True, show_default=False,
                         help="Memory, MiB.")  # fmt: skip
disk_gb = click.option("--disk-gb", type=Integer(), default=0, help="Disk, GB.")
expires_in = click.option("--expires-in", help="When the claim ends, from now (e.g. 8h, 14d).")
expires_at = click.option(
    "--expires-at", help="When the claim ends: an RFC3339 instant with its offset."
)
name_arg = argument("name", callback=options.valid_node_name, help="The node's name.")


def _namespace_first(*after: str) -> Callable[[F], F]:
    """The positional arguments of a verb whose namespace was once its first argument:
    ``[NAMESPACE]`` (deprecated; ``-n``) and then ``after``'s."""
    shown = " ".join(("[NAMESPACE]", *after))
    return argument("arguments", nargs=-1, metavar=shown,
                    help="Once the namespace came first; give it with -n.")  # fmt: skip


def _client_options(command: F) -> F:
    """``--server``, ``--token``, ``-o`` and ``--no-headers``, in that order."""
    return options.server(options.token(options.output(command)))


def _seconds(expires_in: str | None) -> int | None:
    """``--expires-in`` as whole seconds (the domain reads the duration)."""
    if expires_in is None:
        return None
    from fleetgate.domain.durations import DurationError, parse_duration

    try:
        return int(parse_duration(expires_in).total_seconds())
    except DurationError as exc:
        raise fail(f"--expires-in: {exc}", EXIT_INVALID) from None


@dataclass(frozen=True)
class Done:
    """What a verb whose answer is empty did (a release, a delete, a revoke), to print it."""

    kind: str
    id: str
    action: str
    namespace: str | None = None

    def document(self) -> dict[str, Any]:
        """The JSON object ``-o json`` prints."""
        found: dict[str, Any] = {"kind": self.kind, "id": self.id, "action": self.action}
        if self.namespace is not None:
            found["namespace"] = self.namespace
        return found


def show_done(done: Done, output: Output) -> None:
    """Print one thing done: a line for people, its id for ``-o name``, an object for scripts."""
    if output is Output.name:
        click.echo(done.id)
    elif output is Output.json:
        click.echo(json.dumps(done.document(), indent=2))
    elif output is Output.yaml:
        click.echo(dump_yaml(done.document()))
    else:
        click.echo(f"{done.kind} {done.id} {done.action}")


# --- placements ---------------------------------------------------------------------------------


@click.command("place")
@options.namespace_or_argument
@_namespace_first()
@cpus
@memory_mb
@disk_gb
@click.option("--node", help="Force this node.")
@click.option("--pool", help="Only nodes of this pool.")
@click.option("--request-id", help="Idempotency key: a retry is answered once.")
@click.option("--dry-run", is_flag=True, help="Say where it would land; place nothing.")
@_client_options
@click.pass_context
def place(
    ctx: click.Context,
    namespace: str | None,
    arguments: tuple[str, ...],
    cpus: int,
    memory_mb: int,
    disk_gb: int,
    node: str | None,
    pool: str | None,
    request_id: str | None,
    dry_run: bool,
    server: str,
    token: str | None,
    output: Output,
    no_headers: bool,
) -> None:
    """Admit a placement in the namespace (507 with the per-dimension refusal when nothing
    fits)."""
    ns, _ = options.namespace_of(ctx, namespace, arguments, 0)
    body = request(cpus=cpus, memory_mb=memory_mb, disk_gb=disk_gb, node=node,
                   pool=pool, request_id=request_id)  # fmt: skip
    if dry_run:
        show_one(call(server, token, lambda api: api.dry_run(ns, body)), output,
                 views.DRY_RUN, not no_headers)  # fmt: skip
    else:
        show_one(call(server, token, lambda api: api.place(ns, body)), output,
                 views.PLACEMENTS, not no_headers)  # fmt: skip


@click.command("release")
@options.namespace_or_argument
@_namespace_first("PLACEMENT_ID...")
@_client_options
@click.pass_context
def release(
    ctx: click.Context,
    namespace: str | None,
    arguments: tuple[str, ...],
    server: str,
    token: str | None,
    output: Output,
    no_headers: bool,
) -> None:
    """Release placements of the namespace; each id is tried, the first failure's code is the
    exit."""
    ns, placement_ids = options.namespace_of(ctx, namespace, arguments, -1)
    code = EXIT_OK
    done: list[dict[str, Any]] = []
    for placement_id in placement_ids:
        try:
            call(server, token, partial(_release, ns, placement_id))
        except click.exceptions.Exit as exc:
            code = code or exc.exit_code
            continue
        released = Done("placement", placement_id, "released", ns)
        if output in (Output.json, Output.yaml):
            done.append(released.document())  # one document for the whole command
        else:
            show_done(released, output)
    if output is Output.json:
        click.echo(json.dumps(done, indent=2))
    elif output is Output.yaml:
        click.echo(dump_yaml(done))
    raise click.exceptions.Exit(code)


def _release(namespace: str, placement_id: str, api: FleetgateClient) -> None:
    api.release(namespace, placement_id)


# --- claims -------------------------------------------------------------------------------------


@click.group(
    "claims",
    cls=Group,
    invoke_without_command=True,
    help="A namespace's capacity claims: list (no subcommand), create, update, delete.",
)
@options.namespace_or_argument
@_client_options
@options.watch("Poll; print each claim that appears, changes or goes.", interval=5.0)
@click.pass_context
def claims_group(
    ctx: click.Context,
    namespace: str | None,
    server: str,
    token: str | None,
    output: Output,
    no_headers: bool,
    watch: bool,
    interval: float,
    watch_count: int,
) -> None:
    """List a namespace's capacity claims: used/limit per dimension, state, expiry."""
    if ctx.invoked_subcommand is not None:
        return
    if namespace is None:
        raise click.UsageError("Missing option '--namespace' / '-n'.", ctx=ctx)
    list_rows(lambda: call(server, token, lambda api: api.claims(namespace)), lambda c: c.id,
              views.CLAIMS, f"No claims in namespace {namespace}.", output, not no_headers,
              watch, interval, watch_count)  # fmt: skip


@claims_group.command("create")
@options.namespace_or_argument
@_namespace_first()
@cpus
@memory_mb
@disk_gb
@expires_in
@expires_at
@_client_options
@click.pass_context
def claims_create(
    ctx: click.Context,
    namespace: str | None,
    arguments: tuple[str, ...],
    cpus: int,
    memory_mb: int,
    disk_gb: int,
    expires_in: str | None,
    expires_at: str | None,
    server: str,
    token: str | None,
    output: Output,
    no_headers: bool,
) -> None:
    """Reserve capacity for the namespace until --expires-in or --expires-at (exactly one)."""
    ns, _ = options.namespace_of(ctx, namespace, arguments, 0)
    body = request(cpus=cpus, memory_mb=memory_mb, disk_gb=disk_gb,
                   expires_in_seconds=_seconds(expires_in), expires_at=expires_at)  # fmt: skip
    show_one(call(server, token, lambda api: api.create_claim(ns, body)), output,
             views.CLAIMS, not no_headers)  # fmt: skip


@claims_group.command("update")
@options.namespace_or_argument
@_namespace_first("CLAIM_ID")
@click.option("--cpus", "--cpu", type=Integer(), help="New CPU limit.")
@click.option("--memory-mb", type=Integer(), help="New memory limit.")
@click.option("--disk-gb", type=Integer(), help="New disk limit.")
@expires_in
@expires_at
@_client_options
@click.pass_context
def claims_update(
    ctx: click.Context,
    namespace: str | None,
    arguments: tuple[str, ...],
    cpus: int | None,
    memory_mb: int | None,
    disk_gb: int | None,
    expires_in: str | None,
    expires_at: str | None,
    server: str,
    token: str | None,
    output: Output,
    no_headers: bool,
) -> None:
    """Change only the limits and expiry given: grow (an admission), shrink, re-date."""
    ns, (claim_id,) = options.namespace_of(ctx, namespace, arguments, 1)
    body = request(cpus=cpus, memory_mb=memory_mb, disk_gb=disk_gb,
                   expires_in_seconds=_seconds(expires_in), expires_at=expires_at)  # fmt: skip
    show_one(call(server, token, lambda api: api.update_claim(ns, claim_id, body)),
             output, views.CLAIMS, not no_headers)  # fmt: skip


@claims_group.command("delete")
@options.namespace_or_argument
@_namespace_first("CLAIM_ID")
@_client_options
@click.pass_context
def claims_delete(
    ctx: click.Context,
    namespace: str | None,
    arguments: tuple[str, ...],
    server: str,
    token: str | None,
    output: Output,
    no_headers: bool,
) -> None:
    """Delete a claim: its namespace's usage goes back to the unclaimed side."""
    ns, (claim_id,) = options.namespace_of(ctx, namespace, arguments, 1)
    call(server, token, lambda api: api.delete_claim(ns, claim_id))
    show_done(Done("claim", claim_id, "deleted", ns), output)


# --- nodes --------------------------------------------------------------------------------------


@click.group(
    "node",
    cls=Group,
    no_args_is_help=True,
    help="One node of the ledger: get, put, delete, cordon, uncordon (admin token).",
)
def node_group() -> None:
    """One node of the ledger: get, put, delete, cordon, uncordon (admin token)."""


@node_group.command("get")
@name_arg
@_client_options
def node_get(name: str, server: str, token: str | None, output: Output, no_headers: bool) -> None:
    """Show one node."""
    show_one(call(server, token, lambda api: api.node(name)), output, views.NODES,
             not no_headers)  # fmt: skip


@node_group.command("put")
@name_arg
@click.option("--threads", type=Integer(), required=True, show_default=False, help="CPU threads.")
@memory_mb
@click.option("--disk-gb", type=Integer(), required=True, show_default=False, help="Disk, GB.")
@click.option("--pool", default="", help="The node's pool.")
@click.option("--label", multiple=True, help="A label KEY=VALUE (repeatable).")
@_client_options
def node_put(
    name: str,
    threads: int,
    memory_mb: int,
    disk_gb: int,
    pool: str,
    label: tuple[str, ...],
    server: str,
    token: str | None,
    output: Output,
    no_headers: bool,
) -> None:
    """Add the node, or replace its capacity, pool and labels (its counters are kept)."""
    labels: dict[str, str] = {}
    for item in label:
        key, sep, value = item.partition("=")
        if not sep:
            raise fail(f"--label: {item!r} is not KEY=VALUE", EXIT_INVALID)
        labels[key] = value
    body = request(threads=threads, memory_mb=memory_mb, disk_gb=disk_gb, pool=pool,
                   labels=labels)  # fmt: skip
    show_one(call(server, token, lambda api: api.put_node(name, body)), output, views.NODES,
             not no_headers)  # fmt: skip


@node_group.command("delete")
@name_arg
@_client_options
def node_delete(
    name: str, server: str, token: str | None, output: Output, no_headers: bool
) -> None:
    """Remove the node (refused, 409 node_busy, while it holds placements)."""
    call(server, token, lambda api: api.delete_node(name))
    show_done(Done("node", name, "deleted"), output)


@node_group.command("cordon")
@name_arg
@_client_options
def node_cordon(
    name: str, server: str, token: str | None, output: Output, no_headers: bool
) -> None:
    """Stop admitting onto the node (its placements stay)."""
    show_one(call(server, token, lambda api: api.cordon(name)), output, views.NODES,
             not no_headers)  # fmt: skip


@node_group.command("uncordon")
@name_arg
@_client_options
def node_uncordon(
    name: str, server: str, token: str | None, output: Output, no_headers: bool
) -> None:
    """Admit onto the node again."""
    show_one(call(server, token, lambda api: api.uncordon(name)), output, views.NODES,
             not no_headers)  # fmt: skip


# --- tokens -------------------------------------------------------------------------------------


@click.group(
    "tokens",
    cls=Group,
    no_args_is_help=True,
    help="A namespace's API tokens: create (the secret is shown once), list, revoke (admin).",
)
def tokens_group() -> None:
    """A namespace's API tokens: create (the secret is shown once), list, revoke (admin)."""


@tokens_group.command("create")
@options.namespace_or_argument
@_namespace_first()
@_client_options
@click.pass_context
def tokens_create(
    ctx: click.Context,
    namespace: str | None,
    arguments: tuple[str, ...],
    server: str,
    token: str | None,
    output: Output,
    no_headers: bool,
) -> None:
    """Make a token for the namespace; its secret is printed this once (-o name: the secret
    alone, for TOKEN=$(...))."""
    ns, _ = options.namespace_of(ctx, namespace, arguments, 0)
    show_one(call(server, token, lambda api: api.create_token(ns)), output, views.NEW_TOKEN,
             not no_headers)  # fmt: skip


@tokens_group.command("list")
@options.namespace_or_argument
@_namespace_first()
@_client_options
@options.watch("Poll; print each token that appears, changes or goes.", interval=5.0)
@click.pass_context
def tokens_list(
    ctx: click.Context,
    namespace: str | None,
    arguments: tuple[str, ...],
    server: str,
    token: str | None,
    output: Output,
    no_headers: bool,
    watch: bool,
    interval: float,
    watch_count: int,
) -> None:
    """List the namespace's tokens, revoked ones included (never their secrets)."""
    ns, _ = options.namespace_of(ctx, namespace, arguments, 0)
    list_rows(lambda: call(server, token, lambda api: api.tokens(ns)), lambda t: t.id,
              views.TOKENS, f"No tokens for namespace {ns}.", output, not no_headers, watch,
              interval, watch_count)  # fmt: skip


@tokens_group.command("revoke")
@options.namespace_or_argument
@_namespace_first("TOKEN_ID")
@_client_options
@click.pass_context
def tokens_revoke(
    ctx: click.Context,
    namespace: str | None,
    arguments: tuple[str, ...],
    server: str,
    token: str | None,
    output: Output,
    no_headers: bool,
) -> None:
    """Revoke a token: it stops authenticating at once."""
    ns, (token_id,) = options.namespace_of(ctx, namespace, arguments, 1)
    call(server, token, lambda api: api.revoke_token(ns, token_id))
    show_done(Done("token", token_id, "revoked", ns), output)


#: The writes, and the groups of them, in the order ``fleetgate --help`` shows them.
COMMANDS = (place, release)
GROUPS = (claims_group, node_group, tokens_group)
