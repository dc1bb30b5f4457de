"""The value types of the ``fleetgate`` command's options and arguments (click's public types).

Each reads a value the way the command always read it (typer through pydantic's lax mode, before
the command was built on click directly): an integer may be written ``+5``, `` 5 ``, ``5_000``
or ``5.0``, a number also ``1e3``; an out-of-range value and a choice not offered are refused in
the same words. The words are stated here once; ``tests/apps/cli/test_params.py`` holds them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

import click

E = TypeVar("E", bound=Enum)

#: An integer as pydantic's lax mode reads one from text: ASCII digits in groups joined by single
#: underscores, a sign, and at most a fraction of zeros.
_INTEGER = re.compile(r"[+-]?[0-9]+(?:_[0-9]+)*(?:\.0+)?")
#: A decimal number the same way (Python's float() also reads non-ASCII digits: not these).
_NUMBER = re.compile(
    r"[+-]?(?:[0-9]+(?:_[0-9]+)*(?:\.(?:[0-9]+(?:_[0-9]+)*)?)?|\.[0-9]+(?:_[0-9]+)*)"
    r"(?:[eE][+-]?[0-9]+(?:_[0-9]+)*)?|[+-]?(?:inf|infinity|nan)",
    re.IGNORECASE,
)


def _bound(value: float) -> str:
    """A bound as the refusal names it (``1``, not ``1.0``)."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def _within(
    kind: click.ParamType[Any, Any],
    value: Any,
    param: click.Parameter | None,
    ctx: click.Context | None,
) -> None:
    low, high = getattr(kind, "min", None), getattr(kind, "max", None)
    # Written as "not within" so that NaN, which compares false with everything, is refused
    # (by the upper bound first, as pydantic words it; any other value fails one bound only).
    if high is not None and not value <= high:
        kind.fail(f"Input should be less than or equal to {_bound(high)}", param, ctx)
    if low is not None and not value >= low:
        kind.fail(f"Input should be greater than or equal to {_bound(low)}", param, ctx)


class Integer(click.IntRange):
    """A whole number within optional bounds (click shows the bounds in the help)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The value as an int, or a refusal naming the option."""
        if isinstance(value, str):
            text = value.strip()
            if not _INTEGER.fullmatch(text):
                self.fail(
                    "Input should be a valid integer, unable to parse string as an integer",
                    param,
                    ctx,
                )
            value = int(text.partition(".")[0])
        elif isinstance(value, bool) or not isinstance(value, int):
            self.fail("Input should be a valid integer", param, ctx)
        _within(self, value, param, ctx)
        return value


class Number(click.FloatRange):
    """A decimal number within optional bounds."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The value as a float, or a refusal naming the option."""
        if isinstance(value, str):
            text = value.strip()
            # pydantic takes digit groups (5_000) only where no blank surrounds the number.
            if not _NUMBER.fullmatch(text) or ("_" in text and text != value):
                self.fail("Input should be a valid number, unable to parse string as a number",
                          param, ctx)  # fmt: skip
            value = float(text)
        elif isinstance(value, bool) or not isinstance(value, int | float):
            self.fail("Input should be a valid number", param, ctx)
        value = float(value)
        _within(self, value, param, ctx)
        return value


class OneOf(click.Choice):  # type: ignore[type-arg]
    """One value of an enumeration, written exactly (case matters); the member is the value."""

    def __init__(self, kind: type[Enum]) -> None:
        self.kind = kind
        super().__init__([str(member.value) for member in kind], case_sensitive=True)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The enumeration's member, or a refusal listing the values offered."""
        if isinstance(value, self.kind):
            return value
        for member in self.kind:
            if str(member.value) == value:
                return member
        offered = ", ".join(repr(str(m.value)) for m in self.kind)
        self.fail(f"Value error, {value!r} is not one of {offered}.", param, ctx)


class ExistingFile(click.ParamType[Path, Any]):
    """A path that must name an existing file (not a directory)."""

    name = "file"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The path, or a refusal saying it is missing or a directory."""
        path = Path(value)
        if not path.exists():
            self.fail(f"file {str(value)!r} does not exist.", param, ctx)
        if path.is_dir():
            self.fail(f"file {str(value)!r} is a directory.", param, ctx)
        return path


class WritableFile(click.ParamType[Path, Any]):
    """A file the command will write (a report): refused before any work is done when it could
    not be written, so a long run never ends in a failed write."""

    name = "file"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The path, or a refusal saying why it cannot be written."""
        path = Path(value)
        folder = path.parent
        if path.is_dir():
            self.fail(f"{str(value)!r} is a directory.", param, ctx)
        if not folder.is_dir():
            self.fail(f"cannot write {str(value)!r}: no directory {str(folder)!r}.", param, ctx)
        writable = os.access(path, os.W_OK) if path.exists() else os.access(folder, os.W_OK)
        if not writable:
            self.fail(f"cannot write {str(value)!r}: permission denied.", param, ctx)
        return path


class Argument(click.Argument):
    """A positional argument whose refusals name it as written in the code (``'policy'``)."""

    def get_error_hint(self, ctx: click.Context | None) -> str:
        """The argument's name as an error message quotes it."""
        return f"'{self.name}'"


F = TypeVar("F", bound=Callable[..., Any])


def argument(name: str, **attrs: Any) -> Callable[[F], F]:
    """A positional argument (click's) with its help and :class:`Argument`'s error hint."""
    return click.argument(name, cls=Argument, **attrs)


#: A path taken as given (the command reads it and words its own refusal).
PATH = click.Path(path_type=Path)

__all__ = [
    "PATH",
    "Argument",
    "ExistingFile",
    "Integer",
    "Number",
    "OneOf",
    "WritableFile",
    "argument",
]
