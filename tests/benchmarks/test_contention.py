"""The contention benchmark runs end to end on SQLite (tiny: 4 writers, 100 admissions).

Not a performance test: it checks the table's columns, that every admission was answered and
that no placement was lost or doubled; no figure is compared with a speed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmarks.sizes import PROFILES
from benchmarks.targets import all_targets
from rich.console import Console

from benchmarks import contention

pytestmark = pytest.mark.slow


async def test_a_tiny_contention_run_loses_and_doubles_nothing(tmp_path: Path) -> None:
    sqlite = [t for t in all_targets() if t.key == "sqlite"]
    console = Console(file=(tmp_path / "out.txt").open("w"))
    section = await contention.section(sqlite, PROFILES["tiny"], console)
    (table,) = section.tables
    assert table.columns == contention.COLUMNS
    assert [row[1] for row in table.rows] == ["none", "claims + reconcile"]
    for row in table.rows:
        cell = dict(zip(table.columns, row, strict=True))
        assert cell["backend"] == "SQLite" and cell["writers"] == "4"
        assert cell["admissions"] == "100", row
        assert cell["5xx"] == "0" and cell["lost"] == "0" and cell["doubled"] == "0", row
        assert float(cell["admissions/s"]) > 0 and float(cell["p99 ms"]) >= float(cell["p50 ms"])
    assert not section.findings
