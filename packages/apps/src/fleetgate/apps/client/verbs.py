"""The client's writes: ``place``, ``release``, ``claims create|update|delete``,
``node get|put|delete|cordon|uncordon`` and ``tokens create|list|revoke``.

Shapes follow kubectl and openstack: the verb's subject is positional (``fleetgate release NS
ID``, ``fleetgate node cordon NAME``), sizes are options named as the API names its fields. A
request is sent as the options give it and the API judges it (bad input: its 422 naming the
field, exit 2); an answer is printed with ``-o`` like every listing; the exit codes are
``calls``'.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import click

from fleetgate.apps.cli.group import Group
from fleetgate.apps.cli.params import Integer, argument
from fleetgate.apps.client import options, views
from fleetgate.apps.client.calls import EXIT_INVALID, EXIT_OK, call, fail, request, show, show_one
from fleetgate.apps.client.output import Output

if TYPE_CHECKING:
    from fleetgate.apps.client.api import FleetgateClient

F = TypeVar("F", bound=Callable[..., Any])

namespace_arg = argument("namespace", help="The namespace.")
cpus = click.option("--cpus", "--cpu", type=Integer(), required=True, show_default=False,
                    help="CPUs.")  # fmt: skip
memory_mb = click.option("--memory-mb", type=Integer(), required=True, show_default=False,
                         help="Memory, MiB.")  # fmt: skip
disk_gb = click.option("--disk-gb", type=Integer(), default=0, help="Disk, GB.")
expires_in = click.option("--expires-in", help="When the claim ends, from now (e.g. 8h, 14d).")
expires_at = click.option(
    "--expires-at", help="When the claim ends: an RFC3339 instant with its offset."
)
name_arg = argument("name", help="The node's name.")


def _client_options(with_output: bool = True) -> Callable[[F], F]:
    """``--server``, ``--token`` and (for a verb that prints an object) ``-o``, in that order."""

    def add(command: F) -> F:
        if with_output:
            command = options.output(command)
        return options.server(options.token(command))

    return add


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


@click.command("place")
@namespace_arg
@cpus
@memory_mb
@disk_gb
@click.option("--node", help="Force this node.")
@click.option("--pool", help="Only nodes of this pool.")
@click.option("--request-id", help="Idempotency key: a retry is answered once.")
@click.option("--dry-run", is_flag=True, help="Say where it would land; place nothing.")
@_client_options()
def place(
    namespace: str,
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
) -> None:
    """Admit a placement in NAMESPACE (507 with the per-dimension refusal when nothing fits)."""
    body = request(cpus=cpus, memory_mb=memory_mb, disk_gb=disk_gb, node=node,
                   pool=pool, request_id=request_id)  # fmt: skip
    if dry_run:
        show_one(call(server, token, lambda api: api.dry_run(namespace, body)), output,
                 views.DRY_RUN)  # fmt: skip
    else:
        show_one(call(server, token, lambda api: api.place(namespace, body)), output,
                 views.PLACEMENTS)  # fmt: skip


@click.command("release")
@namespace_arg
@argument("placement_ids", nargs=-1, required=True, help="Placement ids.")
@_client_options(with_output=False)
def release(namespace: str, placement_ids: tuple[str, ...], server: str, token: str | None) -> None:
    """Release placements of NAMESPACE; each id is tried, the first failure's code is the exit."""
    code = EXIT_OK
    for placement_id in placement_ids:
        try:
            call(server, token, partial(_release, namespace, placement_id))
        except click.exceptions.Exit as exc:
            code = code or exc.exit_code
            continue
        click.echo(f"placement {placement_id} released")
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
@click.option("--namespace", "-n", help="The namespace to list.")
@_client_options()
@click.pass_context
def claims_group(
    ctx: click.Context, namespace: str | None, server: str, token: str | None, output: Output
) -> None:
    """List a namespace's capacity claims: used/limit per dimension, state, expiry."""
    if ctx.invoked_subcommand is not None:
        return
    if namespace is None:
        raise fail("--namespace: give the namespace whose claims to list (-n NS)", EXIT_INVALID)
    found = call(server, token, lambda api: api.claims(namespace))
    show(found, output, views.CLAIMS, f"No claims in namespace {namespace}.")


@claims_group.command("create")
@namespace_arg
@cpus
@memory_mb
@disk_gb
@expires_in
@expires_at
@_client_options()
def claims_create(
    namespace: str,
    cpus: int,
    memory_mb: int,
    disk_gb: int,
    expires_in: str | None,
    expires_at: str | None,
    server: str,
    token: str | None,
    output: Output,
) -> None:
    """Reserve capacity for NAMESPACE until --expires-in or --expires-at (exactly one)."""
    body = request(cpus=cpus, memory_mb=memory_mb, disk_gb=disk_gb,
                   expires_in_seconds=_seconds(expires_in), expires_at=expires_at)  # fmt: skip
    show_one(call(server, token, lambda api: api.create_claim(namespace, body)), output,
             views.CLAIMS)  # fmt: skip


@claims_group.command("update")
@namespace_arg
@argument("claim_id", help="The claim's id.")
@click.option("--cpus", "--cpu", type=Integer(), help="New CPU limit.")
@click.option("--memory-mb", type=Integer(), help="New memory limit.")
@click.option("--disk-gb", type=Integer(), help="New disk limit.")
@expires_in
@expires_at
@_client_options()
def claims_update(
    namespace: str,
    claim_id: str,
    cpus: int | None,
    memory_mb: int | None,
    disk_gb: int | None,
    expires_in: str | None,
    expires_at: str | None,
    server: str,
    token: str | None,
    output: Output,
) -> None:
    """Change only the limits and expiry given: grow (an admission), shrink, re-date."""
    body = request(cpus=cpus, memory_mb=memory_mb, disk_gb=disk_gb,
                   expires_in_seconds=_seconds(expires_in), expires_at=expires_at)  # fmt: skip
    show_one(call(server, token, lambda api: api.update_claim(namespace, claim_id, body)),
             output, views.CLAIMS)  # fmt: skip


@claims_group.command("delete")
@namespace_arg
@argument("claim_id", help="The claim's id.")
@_client_options(with_output=False)
def claims_delete(namespace: str, claim_id: str, server: str, token: str | None) -> None:
    """Delete a claim: its namespace's usage goes back to the unclaimed side."""
    call(server, token, lambda api: api.delete_claim(namespace, claim_id))
    click.echo(f"claim {claim_id} deleted")


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
@_client_options()
def node_get(name: str, server: str, token: str | None, output: Output) -> None:
    """Show one node."""
    show_one(call(server, token, lambda api: api.node(name)), output, views.NODES)


@node_group.command("put")
@name_arg
@click.option("--threads", type=Integer(), required=True, show_default=False, help="CPU threads.")
@memory_mb
@click.option("--disk-gb", type=Integer(), required=True, show_default=False, help="Disk, GB.")
@click.option("--pool", default="", help="The node's pool.")
@click.option("--label", multiple=True, help="A label KEY=VALUE (repeatable).")
@_client_options()
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
    show_one(call(server, token, lambda api: api.put_node(name, body)), output, views.NODES)


@node_group.command("delete")
@name_arg
@_client_options(with_output=False)
def node_delete(name: str, server: str, token: str | None) -> None:
    """Remove the node (refused, 409 node_busy, while it holds placements)."""
    call(server, token, lambda api: api.delete_node(name))
    click.echo(f"node {name} deleted")


@node_group.command("cordon")
@name_arg
@_client_options()
def node_cordon(name: str, server: str, token: str | None, output: Output) -> None:
    """Stop admitting onto the node (its placements stay)."""
    show_one(call(server, token, lambda api: api.cordon(name)), output, views.NODES)


@node_group.command("uncordon")
@name_arg
@_client_options()
def node_uncordon(name: str, server: str, token: str | None, output: Output) -> None:
    """Admit onto the node again."""
    show_one(call(server, token, lambda api: api.uncordon(name)), output, views.NODES)


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
@namespace_arg
@_client_options()
def tokens_create(namespace: str, server: str, token: str | None, output: Output) -> None:
    """Make a token for NAMESPACE; its secret is printed this once (-o name: the id only)."""
    show_one(call(server, token, lambda api: api.create_token(namespace)), output,
             views.NEW_TOKEN)  # fmt: skip


@tokens_group.command("list")
@namespace_arg
@_client_options()
def tokens_list(namespace: str, server: str, token: str | None, output: Output) -> None:
    """List NAMESPACE's tokens, revoked ones included (never their secrets)."""
    found = call(server, token, lambda api: api.tokens(namespace))
    show(found, output, views.TOKENS, f"No tokens for namespace {namespace}.")


@tokens_group.command("revoke")
@namespace_arg
@argument("token_id", help="The token's id.")
@_client_options(with_output=False)
def tokens_revoke(namespace: str, token_id: str, server: str, token: str | None) -> None:
    """Revoke a token: it stops authenticating at once."""
    call(server, token, lambda api: api.revoke_token(namespace, token_id))
    click.echo(f"token {token_id} revoked")


#: The writes, and the groups of them, in the order ``fleetgate --help`` shows them.
COMMANDS = (place, release)
GROUPS = (claims_group, node_group, tokens_group)
