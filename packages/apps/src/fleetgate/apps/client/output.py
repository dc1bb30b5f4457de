"""How the client commands print an answer: ``-o table|wide|json|yaml|name``, as ``kubectl get``.

``table`` and ``wide`` are plain aligned columns (``wide`` adds columns; ``--no-headers`` drops
the header) and never cut a cell, so an id printed here can be copied into ``fleetgate
release``; ``name`` prints each row's identifier alone, one a line, for scripts; ``json`` and
``yaml`` print the API's own bodies. A column of instants says so in its header when the API
runs on a virtual clock (``fleetgate up``).

``--watch`` prints batch after batch through one :class:`Printer`: the columns' widths are
decided with the first batch and kept, and ``json`` is one document per line (``yaml`` one
document per ``---``). This module imports neither rich nor FastAPI: a client command should
start at once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
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
#: What an instant's column header adds when the API's clock is virtual (``fleetgate up``).
VIRTUAL = " (VIRTUAL)"


class Body(Protocol):
    """A body of the API (``bodies``): ``model_dump`` is its JSON object."""

    def model_dump(self, *, mode: str) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Column:
    """One column: its header, how a row's cell reads, whether only ``wide`` shows it, whether
    it holds instants, and the width ``--watch`` keeps for it at least (an id's, a time's)."""

    header: str
    cell: Callable[[Any], object]
    wide: bool = False
    instant: bool = False
    width: int = 0


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
    return "\n".join(_line(r, widths) for r in (list(headers), *rows))


def _line(cells: Sequence[str], widths: Sequence[int]) -> str:
    return GAP.join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()


def _text(value: object) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


@dataclass
class Printer:
    """Prints rows as ``output`` asks, batch after batch (``stream``: as ``--watch`` does).

    A single answer prints as it always has (a table sized to its rows, a JSON array); a
    stream sizes its table with its first batch and keeps those widths, prints its header
    once, and writes each row as a JSON document of its own line.
    """

    output: Output
    view: View
    headers: bool = True
    virtual: bool = False
    stream: bool = False
    _widths: list[int] | None = field(default=None, init=False)

    def columns(self) -> list[Column]:
        """The columns ``output`` shows."""
        return [c for c in self.view.columns if self.output is Output.wide or not c.wide]

    def render(self, rows: Sequence[Body]) -> str:
        """The text of ``rows``: empty when ``table``/``wide``/``name`` have none to show."""
        dumped = [r.model_dump(mode="json") for r in rows]
        if self.output is Output.json:
            if self.stream:
                return "\n".join(json.dumps(d) for d in dumped)
            return json.dumps(dumped, indent=2)
        if self.output is Output.yaml:
            if self.stream:
                return "\n".join(f"---\n{dump_yaml(d)}" for d in dumped)
            return dump_yaml(dumped)
        if self.output is Output.name:
            return "\n".join(self.view.name(r) for r in rows)
        return self._table(rows)

    def render_one(self, row: Body) -> str:
        """One object (what a write answers): json/yaml print the object itself, not a list."""
        if self.output is Output.json:
            return json.dumps(row.model_dump(mode="json"), indent=2)
        if self.output is Output.yaml:
            return dump_yaml(row.model_dump(mode="json"))
        return self.render([row])

    def _table(self, rows: Sequence[Body]) -> str:
        columns = self.columns()
        cells = [[_text(c.cell(r)) for c in columns] for r in rows]
        header = [c.header + (VIRTUAL if self.virtual and c.instant else "") for c in columns]
        first = self._widths is None
        if not self.stream:
            if not cells:
                return ""
            if not self.headers:
                widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
                return "\n".join(_line(row, widths) for row in cells)
            return text_table(header, cells)
        if not cells:
            return ""
        if self._widths is None:  # decided once, with the first rows, and kept
            self._widths = [
                max([c.width, len(h), *(len(row[i]) for row in cells)])
                for i, (c, h) in enumerate(zip(columns, header, strict=True))
            ]
        lines = [_line(row, self._widths) for row in cells]
        if first and self.headers:
            lines.insert(0, _line(header, self._widths))
        return "\n".join(lines)


def dump_yaml(data: object) -> str:
    """Block-style YAML in the API's field order (PyYAML loads only when YAML is asked for)."""
    import yaml

    text: str = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    return text.rstrip("\n")
