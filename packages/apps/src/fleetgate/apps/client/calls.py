"""One call of the API from a client command: its error as one line, its exit code, its output.

Exit codes (docs/api.md):

* 0 done;
* 1 the API refused (401, 403, 404, 409, 507, ...);
* 2 invalid input: an option the CLI refuses, or the API's 422;
* 3 the API could not be reached or is unavailable (502, 503, 504): worth retrying.

A write sends its request as the options give it: the API is the one judge of a body (its 422
names the field, exit 2, and changes nothing), so every entry point gets the same answer from
the same rule.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import click

from fleetgate.apps.client.output import Body, Output, Printer, View

if TYPE_CHECKING:
    from fleetgate.apps.client.api import FleetgateClient

EXIT_OK, EXIT_REFUSED, EXIT_INVALID, EXIT_UNAVAILABLE = 0, 1, 2, 3
#: Answers that say "try again later" rather than "no".
UNAVAILABLE = frozenset({502, 503, 504})
T = TypeVar("T")


@dataclass
class Answered:
    """What the last answer said of itself: whether its instants are on a virtual clock."""

    virtual_clock: bool = False


#: The command's last answer (a command talks to one API; each call sets it anew).
ANSWERED = Answered()


def fail(message: str, code: int) -> click.exceptions.Exit:
    """Print ``error: message`` as one line on stderr, credentials masked; the exit to raise."""
    from fleetgate.apps.redaction import redact

    print(f"error: {redact(' '.join(message.split()))}", file=sys.stderr)
    return click.exceptions.Exit(code)


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
    from fleetgate.apps.client.api import ClientError, FleetgateClient

    try:
        with FleetgateClient(server, token) as api:
            result = action(api)
            ANSWERED.virtual_clock = api.virtual_clock
            return result
    except ClientError as exc:
        raise fail(str(exc), exit_code(exc.status)) from None


def request(**fields: Any) -> dict[str, Any]:
    """A request body from options, leaving out those not given (the API's defaults apply).

    It is not checked here: checking it with the API's pydantic schema cost a write more start-up
    than the whole of a read (docs/performance.md, CLI start-up), and the API's 422 already names
    the field as sent; ``call`` prints it on one line with exit 2.
    """
    return {k: v for k, v in fields.items() if v is not None}


def printer(output: Output, view: View, headers: bool = True, *, stream: bool = False) -> Printer:
    """How this command prints: ``output``, headers or not, the instants labelled virtual when
    the API said its clock is (and, for json and yaml, which keep the API's bodies, a note)."""
    if ANSWERED.virtual_clock and output in (Output.json, Output.yaml):
        note(
            "fleetgate: note: the API runs on a virtual clock (fleetgate up): its times are virtual"
        )
    return Printer(output, view, headers=headers, virtual=ANSWERED.virtual_clock, stream=stream)


def show(
    rows: Sequence[Body], output: Output, view: View, empty: str, headers: bool = True
) -> None:
    """Print ``rows``; when that prints nothing (table, wide and name of no rows), say why on
    stderr instead, as kubectl says "No resources found"."""
    text = printer(output, view, headers).render(rows)
    if text:
        click.echo(text)
    else:
        note(empty)


def show_one(row: Body, output: Output, view: View, headers: bool = True) -> None:
    """Print the one object a write answers."""
    click.echo(printer(output, view, headers).render_one(row))
