"""The class every ``fleetgate`` command group is made with (``typer.Typer(cls=Group)``).

``clicoerce.LeanGroup`` builds on typer's internals as typer 0.29 has them (the lock pins it).
Under a typer without them (the dependency range allows older and newer ones) the command must
still start: it then uses typer's own group, which reads every value through pydantic — correct,
only slower (``tests/apps/test_clicoerce.py`` fails should the lean path be lost with the lock).
"""

from __future__ import annotations

try:
    from fleetgate.apps.clicoerce import LeanGroup as Group
except ImportError:  # a typer whose internals differ: its own coercion throughout
    from typer.core import TyperGroup as Group  # type: ignore[assignment]

__all__ = ["Group"]
