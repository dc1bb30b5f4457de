"""The options every client command takes: where the API is, who calls, how to print, polling."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from fleetgate.apps.cli.params import Integer, Number, OneOf
from fleetgate.apps.client.defaults import DEFAULT_SERVER, SERVER_ENV, TOKEN_ENV
from fleetgate.apps.client.output import OUTPUT_HELP, Output

server = click.option(
    "--server",
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
output = click.option("--output", "-o", type=OneOf(Output), default=Output.table, help=OUTPUT_HELP)
#: ``-n NS`` where a command needs the namespace.
namespace = click.option("--namespace", "-n", required=True, help="The namespace.")
#: How many polls ``--watch`` makes before it stops: for scripts, and for tests (bound by count).
watch_count = click.option(
    "--watch-count",
    type=Integer(min=0),
    default=0,
    help="With --watch: stop after N polls (0: Ctrl-C).",
)


F = TypeVar("F", bound=Callable[..., Any])


def interval(default: float) -> Callable[[F], F]:
    """``--interval``: seconds between two polls of ``--watch``."""
    return click.option(
        "--interval",
        type=Number(min=0.0, max=3600.0),
        default=default,
        help="Seconds between polls.",
    )
