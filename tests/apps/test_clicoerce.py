"""``clicoerce``: every option and argument of every ``fleetgate`` command reads a value exactly as
typer's own (pydantic) coercion reads it: the same value of the same type, or the same refusal."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer._click import Context
from typer._click.core import Command
from typer._click.exceptions import BadParameter
from typer._coercion import RuntimeParam, build_runtime_param
from typer.core import TyperGroup, _TyperParameter
from typer.main import get_command

from fleetgate.apps.cli import app
from fleetgate.apps.clicoerce import UNSURE, LeanGroup, LeanParam, fast_value


def commands(command: Command, path: str = "fleetgate") -> Iterator[tuple[str, Command]]:
    yield path, command
    if isinstance(command, TyperGroup):
        for name, sub in command.commands.items():
            yield from commands(sub, f"{path} {name}")


PARAMS = [
    (f"{path} {param.name}", command, param)
    for path, command in commands(get_command(app))
    for param in command.get_params(Context(command))
    if isinstance(param, _TyperParameter)
]
#: Values an operator types, near every edge the fast path draws (bounds, signs, spellings).
TYPED = st.one_of(
    st.sampled_from(["json", "JSON", "table", "wide", "yaml", "name", "xml", "", " ", "0", "-0",
                     "1", "-1", "007", "50", "1000", "1001", "65535", "65536", "+5", " 5", "5 ",
                     "5_0", "5.0", "5.5", "0.001", "0.0001", "1e3", "inf", "-inf", "nan", "3600",
                     "3600.5", "99999999999999999999", "true", "k=v", "a\0b", "."]),
    st.text(alphabet="0123456789-+._e x", max_size=6),
)  # fmt: skip


def outcome(runtime: RuntimeParam, param: _TyperParameter, ctx: Context, value: Any) -> Any:
    """What ``runtime`` makes of ``value``: the value and its type, or typer's refusal."""
    try:
        read = runtime.coerce(value, param=param, ctx=ctx)
    except BadParameter as exc:
        return ("refused", exc.format_message())
    return ("read", read, type(read), [type(v) for v in read] if isinstance(read, list) else [])


def lean_and_typer(command: Command, param: _TyperParameter) -> tuple[Any, Any, Context]:
    d = param.type_descriptor
    return (LeanParam(d.parameter_info, d.annotation, descriptor=d), build_runtime_param(d),
            Context(command))  # fmt: skip


@pytest.mark.parametrize(("where", "command", "param"), PARAMS, ids=[p[0] for p in PARAMS])
@settings(max_examples=60, deadline=None)
@given(value=TYPED)
def test_a_typed_value_reads_as_typer_reads_it(
    where: str, command: Command, param: _TyperParameter, value: str
) -> None:
    lean, typer_own, ctx = lean_and_typer(command, param)
    given_value: Any = [value, value] if param.multiple or param.nargs == -1 else value
    assert outcome(lean, param, ctx, given_value) == outcome(typer_own, param, ctx, given_value)


@pytest.mark.parametrize(("where", "command", "param"), PARAMS, ids=[p[0] for p in PARAMS])
def test_every_default_reads_as_typer_reads_it_and_without_pydantic(
    where: str, command: Command, param: _TyperParameter
) -> None:
    lean, typer_own, ctx = lean_and_typer(command, param)
    value = param.get_default(ctx)
    assert outcome(lean, param, ctx, value) == outcome(typer_own, param, ctx, value)
    if value is not None and not isinstance(value, bool):
        assert fast_value(param.type_descriptor, value) is not UNSURE, where


def test_paths_read_as_typer_reads_them_existing_or_not(tmp_path: Path) -> None:
    (tmp_path / "file.yaml").write_text("x")
    values = [str(tmp_path / "file.yaml"), str(tmp_path), str(tmp_path / "missing"), "rel.yaml"]
    path_params = [p for p in PARAMS if p[2].type_descriptor.is_path]
    assert {p[0] for p in path_params} >= {"fleetgate config", "fleetgate check policy"}
    for where, command, param in path_params:
        lean, typer_own, ctx = lean_and_typer(command, param)
        for value in values:
            expected = outcome(typer_own, param, ctx, value)
            assert outcome(lean, param, ctx, value) == expected, (where, value)


def test_the_common_values_need_no_adapter() -> None:
    # The point of the module: -o json, --limit 50, a path, a name are read without pydantic.
    by_where = {where: param for where, _, param in PARAMS}
    for where, value in [("fleetgate nodes output", "json"), ("fleetgate events limit", "50"),
                         ("fleetgate status interval", "2.5"), ("fleetgate nodes server", "x"),
                         ("fleetgate check policy", "p.yaml"),
                         ("fleetgate release placement_ids", ["a", "b"])]:  # fmt: skip
        assert fast_value(by_where[where].type_descriptor, value) is not UNSURE, where


def test_every_group_of_the_command_is_lean() -> None:
    # A group made without cls=LeanGroup would read its subcommands' values through pydantic.
    groups = [path for path, c in commands(get_command(app)) if isinstance(c, TyperGroup)]
    assert groups == [path for path, c in commands(get_command(app)) if isinstance(c, LeanGroup)]
    assert {"fleetgate", "fleetgate db", "fleetgate claims", "fleetgate node"} <= set(groups)
