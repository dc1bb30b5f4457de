"""``fleetgate --show-completion`` and ``--install-completion``: click's own completion scripts.

The shell is the one the command was started from (the parent process, read from ``/proc``),
else the login shell (``$SHELL``). The script is click's (``click.shell_completion``): it calls
``fleetgate`` back with ``_FLEETGATE_COMPLETE`` set, which click answers before any command
runs. Installing writes the script into a file of its own and, for bash and zsh, sources it from
the shell's start-up file once.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import click
from click.shell_completion import get_completion_class

#: What a shell's process is called, by the name click's completion classes go by.
SHELLS = {"bash": "bash", "zsh": "zsh", "fish": "fish", "pwsh": "powershell",
          "powershell": "powershell"}  # fmt: skip


def current_shell() -> str | None:
    """The shell this command runs under: its parent process, else the login shell."""
    try:
        parent = Path(f"/proc/{os.getppid()}/comm").read_text().strip()
    except OSError:  # no /proc (macOS): the login shell only
        parent = ""
    return SHELLS.get(parent) or SHELLS.get(Path(os.environ.get("SHELL", "")).name)


def complete_var(prog: str) -> str:
    """The variable click's completion calls ``prog`` back with (``_FLEETGATE_COMPLETE``)."""
    return "_{}_COMPLETE".format(prog.replace(" ", "_").replace("-", "_").upper())


def script(ctx: click.Context, shell: str) -> str:
    """The completion script of ``shell`` for the root command of ``ctx``."""
    root = ctx.find_root()
    prog = root.info_name or "fleetgate"
    complete = get_completion_class(shell)
    if complete is None:  # SHELLS names only shells click completes
        raise click.UsageError(f"shell {shell} is not supported")
    return complete(root.command, {}, prog, complete_var(prog)).source()


def _shell_or_fail() -> str:
    shell = current_shell()
    if shell is None:
        raise click.UsageError(
            "cannot tell which shell this is (bash, zsh, fish or PowerShell); "
            "run it from that shell"
        )
    return shell


def show(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``--show-completion``: print the script for this shell and exit."""
    if not value or ctx.resilient_parsing:
        return
    click.echo(script(ctx, _shell_or_fail()))
    ctx.exit(0)


def install(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``--install-completion``: install the script for this shell and exit."""
    if not value or ctx.resilient_parsing:
        return
    shell = _shell_or_fail()
    prog = ctx.find_root().info_name or "fleetgate"
    path = _install(shell, prog, script(ctx, shell))
    click.secho(f"{shell} completion installed in {path}", fg="green")
    click.echo("Completion will take effect once you restart the terminal")
    ctx.exit(0)


def _install(shell: str, prog: str, text: str) -> Path:
    home = Path.home()
    if shell == "bash":
        return _sourced(home / ".bash_completions" / f"{prog}.sh", home / ".bashrc", text)
    if shell == "zsh":
        return _sourced(home / ".zfunc" / f"_{prog}", home / ".zshrc", text)
    if shell == "fish":
        return _written(home / ".config" / "fish" / "completions" / f"{prog}.fish", text)
    profile = subprocess.run(  # PowerShell names its own profile file
        ["pwsh", "-NoProfile", "-Command", "echo", "$profile"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if not profile:
        raise click.UsageError("cannot find the PowerShell profile to install into")
    path = Path(profile)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.write(f"\n{text}\n")
    return path


def _written(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{text}\n", encoding="utf-8")
    return path


def _sourced(path: Path, rc: Path, text: str) -> Path:
    """Write the script to ``path`` and source it from ``rc`` (once)."""
    _written(path, text)
    line = f"source '{path}'"
    existing = rc.read_text(encoding="utf-8") if rc.is_file() else ""
    if line not in existing:
        with rc.open("a", encoding="utf-8") as out:
            out.write(f"\n{line}\n")
    return path
