"""The options every client command takes: where the API is, who calls, the namespace, how to
print, and ``--watch``'s polling.

The namespace is ``-n/--namespace`` everywhere one is meant, as in kubectl. The commands that
took it as their first argument (``place NS``, ``release NS ID``, ``claims create NS``, ``tokens
create NS``, ...) still do, with a deprecation note on stderr (:func:`namespace_of`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit

import click

from fleetgate.apps.cli.params import Integer, Number, OneOf
from fleetgate.apps.client.defaults import DEFAULT_SERVER, SERVER_ENV, TOKEN_ENV
from fleetgate.apps.client.output import OUTPUT_HELP, Output

F = TypeVar("F", bound=Callable[..., Any])


class ServerUrl(click.ParamType[str, Any]):
    """The API's base URL: ``http://`` or ``https://`` and a host (a typo is bad input, not an
    unreachable server). A password in it is never repeated in the refusal."""

    name = "url"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """``value`` when it is such a URL, else a refusal naming the option."""
        text = str(value)
        try:
            url = urlsplit(text)
            url.port  # noqa: B018 (a port that is no number raises here)
        except ValueError as exc:
            self.fail(f"not a URL: {exc}", param, ctx)
        if (
            url.scheme not in ("http", "https")
            or not url.hostname
            or any(c.isspace() for c in text)
        ):
            from fleetgate.apps.redaction import redact

            self.fail(
                f"{redact(text)!r} is not an http:// or https:// URL with a host "
                "(e.g. http://127.0.0.1:8000)",
                param,
                ctx,
            )
        return text


server = click.option(
    "--server",
    type=ServerUrl(),
    envvar=SERVER_ENV,
    show_envvar=True,
    default=DEFAULT_SERVER,
    show_default=True,
    help="The API's base URL.",
)
token = click.option(
    "--token",
    envvar=TOKEN_ENV,
    show_envvar=True,
    default=None,
    show_default=False,
    help="Bearer token (admin or namespace).",
)


def output(command: F) -> F:
    """``-o/--output`` and ``--no-headers``."""
    command = click.option(
        "--no-headers", is_flag=True, help="Print table rows without the header (table, wide)."
    )(command)
    return click.option(
        "--output", "-o", type=OneOf(Output), default=Output.table, help=OUTPUT_HELP
    )(command)


def valid_namespace(_ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A namespace option's value, refused (naming the option) when it is no namespace by the
    domain's one rule (the API's too)."""
    from fleetgate.domain.capacity.names import check_namespace

    if value is not None:
        try:
            check_namespace(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc).partition(": ")[2], param=param) from None
    return value


def valid_node_name(_ctx: click.Context, param: click.Parameter, value: str) -> str:
    """A node NAME argument, refused (naming it) when it is no node name by the domain's one
    rule: a ``/`` in it could not even travel to the API as one segment of its URL."""
    from fleetgate.domain.capacity.names import check_node_name

    try:
        return check_node_name(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc).partition(": ")[2], param=param) from None


#: ``-n NS`` where a command needs the namespace.
namespace = click.option(
    "--namespace", "-n", required=True, callback=valid_namespace, help="The namespace."
)
#: ``-n NS`` on a command that still takes the namespace as its first argument too.
namespace_or_argument = click.option(
    "--namespace",
    "-n",
    callback=valid_namespace,
    help="The namespace (required; once the first argument, which is deprecated).",
)
#: ``-n NS`` where it narrows what is listed.
only_namespace = click.option(
    "--namespace", "-n", callback=valid_namespace, help="Only this namespace."
)


def watch(help_text: str, interval: float) -> Callable[[F], F]:
    """``-w/--watch``, ``--interval`` and ``--watch-count`` (polling: the API has no stream)."""

    def add(command: F) -> F:
        command = click.option(
            "--watch-count",
            type=Integer(min=0),
            default=0,
            help="With --watch: stop after N polls (0: Ctrl-C).",
        )(command)
        command = click.option(
            "--interval",
            type=Number(min=0.0, max=3600.0),
            default=interval,
            help="Seconds between polls.",
        )(command)
        return click.option("--watch", "-w", is_flag=True, help=help_text)(command)

    return add


def namespace_of(
    ctx: click.Context, option: str | None, arguments: Sequence[str], wanted: int
) -> tuple[str, list[str]]:
    """The namespace and the other positional arguments of a command that takes ``wanted`` of
    them after the namespace (-1: one or more).

    ``-n NS`` is the namespace; without it the first argument is (the old form: it still works,
    with a deprecation note on stderr). A namespace that is none is refused as ``-n`` would be.
    """
    import sys

    rest = list(arguments)
    hint = "'--namespace' / '-n'"
    if option is None:
        if not rest or (wanted >= 0 and len(rest) <= wanted):
            raise click.UsageError(f"Missing option {hint}.", ctx=ctx)
        option = rest.pop(0)
        print(
            "fleetgate: warning: the namespace as the first argument is deprecated; "
            f"use -n {option}",
            file=sys.stderr,
        )
        param = next(p for p in ctx.command.params if p.name == "namespace")
        valid_namespace(ctx, param, option)
    if wanted >= 0 and len(rest) != wanted:
        raise click.UsageError(
            f"Got {len(rest)} argument{'s' * (len(rest) != 1)} after the namespace "
            f"({' '.join(rest) or 'none'}), expected {wanted}.",
            ctx=ctx,
        )
    if wanted < 0 and not rest:
        raise click.UsageError("Missing the ids to act on.", ctx=ctx)
    return option, rest
