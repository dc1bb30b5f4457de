"""The class of every ``fleetgate`` command group: click's, listing its commands in the order
they were added (click sorts them by name), so ``--help`` reads as the command is organised."""

from __future__ import annotations

import click


class Group(click.Group):
    """A click group whose help lists its commands in the order they were added."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """The names of the commands, in the order they were added."""
        return list(self.commands)


__all__ = ["Group"]
