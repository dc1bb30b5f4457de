"""Option values the plain way first: typer without pydantic on the common path.

typer (0.29) turns every option and argument of the command being run into a pydantic
``TypeAdapter`` and validates the value through it, even an option left at its default; so every
``fleetgate`` command imported pydantic (about 60 ms of a 0.25 s start, docs/performance.md) for
values such as ``-o json`` or ``--limit 50``. The groups here (``LeanGroup``, set as ``cls`` on
each ``typer.Typer``) give each parameter a coercion that converts the values it is *sure* of
itself (a string, a decimal integer within the bounds, an enum's exact value, a path) to exactly
what typer's adapter returns, and hands every other value to typer's own adapter. A refusal is
therefore always typer's, word for word, and no accepted value differs
(``tests/apps/test_clicoerce.py`` compares the two on every parameter of the command).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from math import isnan
from pathlib import Path
from typing import Any

from typer._click import Context
from typer._click.core import Command, Parameter
from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
from typer.core import TyperGroup, _TyperParameter

#: "Not sure": the value goes to typer's own adapter.
UNSURE: Any = object()
#: The integers and decimals parsed here: plain ASCII digits only (pydantic also takes " 5",
#: "5_000", "+5" or "5.0" for an int; those go to it).
_INT = re.compile(r"-?[0-9]{1,18}")
_DECIMAL = re.compile(r"-?[0-9]{1,15}(\.[0-9]{1,15})?")


def fast_value(descriptor: TypeDescriptor, value: Any) -> Any:
    """``value`` as typer's adapter for ``descriptor`` would return it, or UNSURE."""
    info, kind = descriptor.parameter_info, descriptor.annotation
    if info.parser is not None or descriptor.file_annotation is not None:
        return UNSURE
    if descriptor.is_list:
        (item,) = descriptor.annotation.__args__
        if item is str and isinstance(value, list | tuple) and all(type(v) is str for v in value):
            return list(value)
        return UNSURE
    if kind is str:
        return value if type(value) is str else UNSURE
    if kind is bool:
        return value if type(value) is bool else UNSURE
    if kind is int or kind is float:
        return _number(kind, value, info.min, info.max, bool(info.clamp))
    if isinstance(kind, type) and issubclass(kind, Enum):
        return _choice(kind, value, info.case_sensitive)
    if kind is Path:
        return _path(descriptor, value)
    return UNSURE


def _number(kind: type, value: Any, low: float | None, high: float | None, clamp: bool) -> Any:
    if clamp:
        return UNSURE
    if type(value) is str:
        if not (_INT if kind is int else _DECIMAL).fullmatch(value):
            return UNSURE
        value = kind(value)
    elif type(value) is not kind or (isinstance(value, float) and isnan(value)):
        return UNSURE
    if (low is not None and value < low) or (high is not None and value > high):
        return UNSURE  # typer words the refusal
    return value


def _choice(kind: type[Enum], value: Any, case_sensitive: bool) -> Any:
    if isinstance(value, kind):
        return value
    if not case_sensitive or type(value) is not str:
        return UNSURE
    for member in kind:
        if str(member.value) == value:
            return member
    return UNSURE


def _path(descriptor: TypeDescriptor, value: Any) -> Any:
    from typer._click.exceptions import BadParameter
    from typer._param_types import coerce_cli_path

    info = descriptor.parameter_info
    if info.path_type is not None or info.resolve_path or info.allow_dash:
        return UNSURE
    if type(value) is str and value and "\0" not in value:
        value = Path(value)
    if type(value) is not type(Path()):
        return UNSURE
    try:  # typer's own checks (exists, file or directory, ...) on the Path
        return coerce_cli_path(value, info, path_type=Path)
    except BadParameter:
        return UNSURE  # typer words the refusal


@dataclass(frozen=True)
class LeanParam(RuntimeParam):
    """Coerce the values :func:`fast_value` is sure of; hand the rest to typer's adapter."""

    descriptor: TypeDescriptor

    def _coerce_value(self, value: Any, param: _TyperParameter, ctx: Context) -> Any:
        if ctx.token_normalize_func is None:
            found = fast_value(self.descriptor, value)
            if found is not UNSURE:
                return found
        typer_own = build_runtime_param(self.descriptor)
        return typer_own._coerce_value(value, param=param, ctx=ctx)


def make_lean(params: Sequence[Parameter]) -> None:
    """Give each typer parameter of ``params`` a :class:`LeanParam` (once)."""
    for param in params:
        if isinstance(param, _TyperParameter) and param._runtime_param is None:
            d = param.type_descriptor
            param._runtime_param = LeanParam(d.parameter_info, d.annotation, descriptor=d)


class LeanGroup(TyperGroup):
    """A typer group whose own parameters, and its subcommands', coerce with LeanParam."""

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        make_lean(self.get_params(ctx))  # with --help, which click adds here
        return super().parse_args(ctx, args)

    def resolve_command(
        self, ctx: Context, args: list[str]
    ) -> tuple[str | None, Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if command is not None:
            make_lean(command.get_params(ctx))
        return name, command, rest
