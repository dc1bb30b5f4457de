"""The option value types: a number reads as the API reads one from a query string (pydantic's
lax mode: ``+5``, `` 5 ``, ``5_000``, ``5.0``; ``1e3`` for a decimal) and is refused in the same
words, so a number means the same at every entry point; a choice and a file say what is wrong."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field, TypeAdapter, ValidationError

from fleetgate.apps.cli.main import fleetgate
from fleetgate.apps.cli.params import ExistingFile, Integer, Number, OneOf

#: Numbers as people write them: a sign, digits (in groups: 5_000), a fraction, an exponent, and
#: blanks around one without groups. On these the two readings must agree exactly. (pydantic
#: also reads some malformed text, " 0-4" as -4 or "+._5" as 0.5; the command refuses those.)
PLAIN = st.from_regex(r"[+-]?[0-9]{1,22}(\.[0-9]{1,4})?([eE][+-]?[0-9]{1,3})?", fullmatch=True)
GROUPED = st.from_regex(r"[+-]?[0-9]{1,3}(_[0-9]{1,3}){1,3}(\.0{1,2})?", fullmatch=True)
PADDED = st.tuples(st.sampled_from(["", " ", "\t"]), PLAIN, st.sampled_from(["", " ", "\n"]))
TYPED = st.one_of(
    PLAIN,
    GROUPED,
    PADDED.map("".join),
    st.sampled_from(["0", "-0", "+5", "5.0", "5.", ".5", "5.5", "0.001", "1e3", "1E+3", "inf",
                     "-inf", "Infinity", "nan", "1001", "65536", "99999999999999999999999", "",
                     " ", "abc", "0x10", "٣", "1e", "e3", "+-5", "5__0", "_5", "5_", "5 5"]),
)  # fmt: skip
BOUNDS = [(None, None), (0, None), (1, 1000), (0, 65535)]


def outcome(kind: click.ParamType, value: str) -> tuple[str, Any]:
    try:
        return ("read", kind.convert(value, None, None))
    except click.BadParameter as exc:
        return ("refused", exc.message)


def pydantic_outcome(adapter: TypeAdapter[Any], value: str) -> tuple[str, Any]:
    try:
        return ("read", adapter.validate_python(value))
    except ValidationError as exc:
        return ("refused", exc.errors()[0]["msg"])


@pytest.mark.parametrize(("low", "high"), BOUNDS)
@settings(max_examples=80, deadline=None)
@given(value=TYPED)
def test_an_integer_reads_as_the_api_reads_one(
    low: int | None, high: int | None, value: str
) -> None:
    api = TypeAdapter(Annotated[int, Field(ge=low, le=high)])
    assert outcome(Integer(min=low, max=high), value) == pydantic_outcome(api, value)


@pytest.mark.parametrize(("low", "high"), [(None, None), (0.0, 3600.0), (0.001, None), (1.0, None)])
@settings(max_examples=80, deadline=None)
@given(value=TYPED)
def test_a_number_reads_as_the_api_reads_one(
    low: float | None, high: float | None, value: str
) -> None:
    api = TypeAdapter(Annotated[float, Field(ge=low, le=high)])
    mine, theirs = outcome(Number(min=low, max=high), value), pydantic_outcome(api, value)
    if mine[0] == theirs[0] == "read" and mine[1] != mine[1]:  # NaN, unbounded: read alike
        assert theirs[1] != theirs[1]
    else:
        assert mine == theirs


class Colour(StrEnum):
    red = "red"
    blue = "blue"


def test_a_choice_is_exact_and_its_refusal_lists_the_values() -> None:
    kind = OneOf(Colour)
    assert kind.convert("red", None, None) is Colour.red
    assert kind.convert(Colour.blue, None, None) is Colour.blue
    assert outcome(kind, "RED") == (
        "refused",
        "Value error, 'RED' is not one of 'red', 'blue'.",
    )


def test_a_file_must_exist_and_not_be_a_directory(tmp_path: Path) -> None:
    (tmp_path / "f.yaml").write_text("x")
    kind = ExistingFile()
    assert kind.convert(str(tmp_path / "f.yaml"), None, None) == tmp_path / "f.yaml"
    assert outcome(kind, str(tmp_path / "nope")) == (
        "refused",
        f"file {str(tmp_path / 'nope')!r} does not exist.",
    )
    assert outcome(kind, str(tmp_path)) == ("refused", f"file {str(tmp_path)!r} is a directory.")


def every_param(group: click.Group) -> list[tuple[str, click.Parameter]]:
    found = [(group.name or "", p) for p in group.params]
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found += every_param(command)
        else:
            found += [(name, p) for p in command.params]
    return found


def test_every_number_of_the_command_is_one_of_these_types() -> None:
    # click's own INT and FLOAT read "5_0" or "+5" differently: no option may use them.
    kinds = {type(p.type) for _, p in every_param(fleetgate)}
    assert not kinds & {click.types.IntParamType, click.types.FloatParamType,
                        click.IntRange, click.FloatRange}  # fmt: skip
    assert {Integer, Number, OneOf} <= kinds
