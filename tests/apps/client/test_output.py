"""How an answer prints: a single answer as a table sized to its rows (or without its header),
a stream (``--watch``) in the widths of its first rows with one header, one JSON document per
line, and the instants' columns labelled when the API's clock is virtual."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fleetgate.apps.client.output import Column, Output, Printer, View


@dataclass(frozen=True)
class Row:
    id: str
    at: str | None

    def model_dump(self, *, mode: str = "json") -> dict[str, Any]:
        return {"id": self.id, "at": self.at}


VIEW = View(
    columns=(Column("ID", lambda r: r.id, width=6), Column("AT", lambda r: r.at, instant=True)),
    name=lambda r: r.id,
)


def test_a_single_answer_is_a_table_sized_to_its_rows() -> None:
    rows = [Row("a", "t1"), Row("bbbbbbbbbb", None)]
    assert Printer(Output.table, VIEW).render(rows).splitlines() == [
        "ID           AT",
        "a            t1",
        "bbbbbbbbbb   -",
    ]
    assert Printer(Output.table, VIEW, headers=False).render(rows).splitlines() == [
        "a            t1",
        "bbbbbbbbbb   -",
    ]
    assert Printer(Output.table, VIEW).render([]) == ""
    assert Printer(Output.name, VIEW).render([]) == ""
    assert json.loads(Printer(Output.json, VIEW).render([])) == []


def test_a_stream_keeps_the_widths_of_its_first_rows_and_prints_one_header() -> None:
    stream = Printer(Output.table, VIEW, stream=True)
    assert stream.render([]) == ""  # nothing yet: no header either
    first = stream.render([Row("a", "t1")]).splitlines()
    assert first == ["ID       AT", "a        t1"]  # ID keeps at least its 6 columns
    later = stream.render([Row("b", "t2"), Row("a-much-longer-id", "t3")]).splitlines()
    assert later == ["b        t2", "a-much-longer-id   t3"]  # only the wide cell moves on


def test_a_stream_of_json_is_one_document_per_line_and_yaml_one_per_document() -> None:
    rows = [Row("a", "t1"), Row("b", None)]
    lines = Printer(Output.json, VIEW, stream=True).render(rows).splitlines()
    assert [json.loads(line) for line in lines] == [r.model_dump() for r in rows]
    assert Printer(Output.yaml, VIEW, stream=True).render(rows).count("---\n") == 2


def test_instants_are_labelled_virtual_when_the_api_says_its_clock_is() -> None:
    header = Printer(Output.table, VIEW, virtual=True).render([Row("a", "t1")]).splitlines()[0]
    assert header.split() == ["ID", "AT", "(VIRTUAL)"]
    assert "VIRTUAL" not in Printer(Output.table, VIEW).render([Row("a", "t1")])
