"""The ``fleetgate`` command: its root group, its options, and ``main`` (the console script).

The command is built on click directly. Each subcommand parses its arguments in
``commands`` (the server's and the offline ones) or in the client's own modules
(``fleetgate.apps.client.reads`` and ``verbs``) and hands over to the module that owns the
feature; wiring happens in the composition root, never here.

Exit codes: 0 success, 1 the job ran and found a problem (e.g. a fatal finding) or the command
could not start (one ``error:`` line; ``--debug`` shows the traceback), 2 invalid input.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from fleetgate.apps.cli import commands, completion
from fleetgate.apps.cli.group import Root
from fleetgate.apps.cli.params import ExistingFile
from fleetgate.apps.client import reads, verbs

#: Set by the root ``--debug`` flag: start-up failures then show their traceback.
_debug = False


def installed_version() -> str:
    """The installed fleetgate distribution's version."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fleetgate")
    except PackageNotFoundError:  # running from a source tree without metadata
        return "0+unknown"


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(f"fleetgate {installed_version()}")
        ctx.exit(0)


@click.group(
    "fleetgate",
    cls=Root,
    no_args_is_help=True,
    # Every option shows its default, as the command always has; an option that words its
    # default itself (api --host) or has none worth showing says so.
    context_settings={"show_default": True, "help_option_names": ["-h", "--help"]},
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Print the installed fleetgate version and exit.",
)
@click.option(
    "--debug",
    is_flag=True,
    help="Show the traceback when a command fails to start (also after the command).",
)
@click.option("--config", type=ExistingFile(), help="YAML configuration file (FLEETGATE_CONFIG).")
@click.option(
    "--install-completion",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=completion.install,
    help="Install completion for the current shell.",
)
@click.option(
    "--show-completion",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=completion.show,
    help="Show completion for the current shell, to copy it or customize the installation.",
)
def fleetgate(debug: bool, config: Path | None) -> None:
    """Guarded capacity admission and maintenance-window node rotation."""
    global _debug
    _debug = debug
    if config is not None:
        os.environ["FLEETGATE_CONFIG"] = str(config)
    # Every command names a misspelt FLEETGATE_* variable, the client's and check included
    # (without loading the settings model: fleetgate.apps.variables).
    from fleetgate.apps.variables import warn_unknown_variables

    warn_unknown_variables(os.environ)


@fleetgate.command("version")
def version_cmd() -> None:
    """Print the installed fleetgate version."""
    click.echo(f"fleetgate {installed_version()}")


for _command in (*commands.COMMANDS, *reads.COMMANDS, *verbs.COMMANDS, commands.db_group,
                 *verbs.GROUPS):  # fmt: skip
    fleetgate.add_command(_command)


def main() -> None:
    """Entry point of the ``fleetgate`` console script."""
    run("fleetgate")


def kubectl_main() -> None:
    """Entry point of ``kubectl-fleetgate``: ``kubectl fleetgate ARGS`` runs it with ARGS as
    given (kubectl's plugin convention), and its help and errors name it so."""
    run("kubectl fleetgate")


def run(prog_name: str) -> None:
    """Run the command as ``prog_name``; exit with its status. A refused command line is one
    ``error:`` line (``group.Root``); a start-up failure nobody handled is
    :func:`startup_failure`'s one line (``--debug`` shows the traceback instead)."""
    try:
        fleetgate.main(args=debug_first(sys.argv[1:]), prog_name=prog_name,
                       complete_var=completion.complete_var(prog_name))  # fmt: skip
    except Exception as exc:
        if _debug:
            raise
        raise SystemExit(startup_failure(exc)) from None


def debug_first(args: list[str]) -> list[str]:
    """``args`` with a ``--debug`` given after the command moved before it, where the root
    option reads it (``fleetgate api --debug`` is what people type)."""
    end = args.index("--") if "--" in args else len(args)
    if "--debug" not in args[:end]:
        return args
    return ["--debug", *(a for a in args[:end] if a != "--debug"), *args[end:]]


def startup_failure(exc: BaseException) -> int:
    """Print ``error: ...`` (one line, any credential hidden); the exit status (1)."""
    from rich.console import Console

    from fleetgate.apps.redaction import error_markup

    message = " ".join(str(exc).split()) or type(exc).__name__
    Console(stderr=True).print(
        f"{error_markup(message)} (rerun with --debug for the traceback)",
        highlight=False,
        soft_wrap=True,
    )
    return 1
