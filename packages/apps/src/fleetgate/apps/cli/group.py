"""The classes of the ``fleetgate`` command groups: click's, listing commands in the order they
were added (click sorts them by name), so ``--help`` reads as the command is organised; and the
root, whose every refusal of a command line is one ``error:`` line."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import click


class Group(click.Group):
    """A click group whose help lists its commands in the order they were added."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """The names of the commands, in the order they were added."""
        return list(self.commands)


class Root(Group):
    """The ``fleetgate`` command itself: an option or argument it refuses is one line,
    ``error: <what, naming the option> (see 'fleetgate CMD --help')``, exit 2, as every other
    error of the command is one line (click's own block is four)."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the command; as a program (``standalone_mode``), exit with its status."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:  # a group alone: its help, as before
            exc.show()
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            refused(exc)
        except click.exceptions.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


def refused(exc: click.ClickException) -> NoReturn:
    """Print a refused command line as one ``error:`` line (any credential hidden) and exit
    with its status (2 for a usage error)."""
    from fleetgate.apps.redaction import redact

    message = redact(" ".join(exc.format_message().split()))
    ctx = getattr(exc, "ctx", None)
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    print(f"error: {message}{hint}", file=sys.stderr)
    sys.exit(exc.exit_code)


__all__ = ["Group", "Root"]
