"""How the client commands print an answer: ``-o table|wide|json|yaml|name``, as ``kubectl get``.

``table`` and ``wide`` are plain aligned columns (``wide`` adds columns) and never cut a cell, so
an id printed here can be copied into ``fleetgate release``; ``name`` prints each row's
identifier alone, one a line, for scripts; ``json`` and ``yaml`` print the API's own bodies.
This module imports neither rich nor FastAPI: a client command should start at once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol


class Output(StrEnum):
    """How an answer is printed."""

    table = "table"
    wide = "wide"
    json = "json"
    yaml = "yaml"
    name = "name"


OUTPUT_HELP = "table, wide (more columns), json, yaml or name (identifiers only)."
#: Between two columns, as kubectl separates them.
GAP = "   "


class Body(Protocol):
    """A body of the API (``bodies``): ``model_dump`` is its JSON object."""

    def model_dump(self, *, mode: str) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Column:
    """One column: its header, how a row's cell reads, and whether only ``wide`` shows it."""

    header: str
    cell: Callable[[Any], object]
    wide: bool = False


@dataclass(frozen=True)
class View:
    """How one kind of row is shown: its columns and the identifier ``-o name`` prints."""

    columns: tuple[Column, ...]
    name: Callable[[Any], str]


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Aligned columns, every cell whole (no terminal width cuts an id), no trailing blanks."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    lines = [GAP.join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
             for r in (list(headers), *rows)]  # fmt: skip
    return "\n".join(lines)


def _text(value: object) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def render(rows: Sequence[Body], output: Output, view: View) -> str:
    """``rows`` as ``output`` asks; an empty string when ``table``/``wide``/``name`` have none."""
    if output is Output.json:
        return json.dumps([r.model_dump(mode="json") for r in rows], indent=2)
    if output is Output.yaml:
        return dump_yaml([r.model_dump(mode="json") for r in rows])
    if output is Output.name:
        return "\n".join(view.name(r) for r in rows)
    if not rows:
        return ""
    columns = [c for c in view.columns if output is Output.wide or not c.wide]
    cells = [[_text(c.cell(r)) for c in columns] for r in rows]
    return text_table([c.header for c in columns], cells)


def render_one(row: Body, output: Output, view: View) -> str:
    """One object (what a write answers): json/yaml print the object itself, not a list."""
    if output is Output.json:
        return json.dumps(row.model_dump(mode="json"), indent=2)
    if output is Output.yaml:
        return dump_yaml(row.model_dump(mode="json"))
    return render([row], output, view)


def dump_yaml(data: object) -> str:
    """Block-style YAML in the API's field order (PyYAML loads only when YAML is asked for)."""
    import yaml

    text: str = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    return text.rstrip("\n")
