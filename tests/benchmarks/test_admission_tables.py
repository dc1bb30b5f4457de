"""The admission tables set group commit off and on side by side, cell by cell."""

from __future__ import annotations

from benchmarks.admission import Cell
from benchmarks.admission_tables import batching_table, growth_table, latency_table
from benchmarks.group_commit import Batching
from benchmarks.invariants import Check
from benchmarks.stats import Load

LOADS = {"SQLite": "1.00 / 2.00 / 3.00"}


def _cell(writers: int, per_second: float, mode: str, latency_ms: float) -> Cell:
    ops = 100
    load = Load([latency_ms / 1000] * ops, ops / per_second, 0.1, {"admitted": ops})
    batching = Batching(25, 80, 6, 20, 1) if mode == "on" else None
    return Cell("SQLite", 100, writers, "ledger", load, Check(), mode, batching)


CELLS = [
    _cell(1, 300.0, "off", 3.0),
    _cell(1, 310.0, "on", 3.5),
    _cell(8, 300.0, "off", 26.0),
    _cell(8, 900.0, "on", 9.0),
]


def test_growth_shows_both_settings_and_their_ratio_per_writer_count() -> None:
    t = growth_table(CELLS, 100, [1, 8, 64], LOADS)
    assert t.columns == ["backend", "group commit", "1", "8", "64"]
    assert t.rows == [
        ["SQLite", "off", "300", "300", "-"],
        ["SQLite", "on", "310", "900", "-"],
        ["SQLite", "on/off", "1.03", "3.00", "-"],
    ]
    assert any("SQLite 1.00 / 2.00 / 3.00" in n for n in t.notes)


def test_latency_added_is_on_minus_off_at_the_same_writers() -> None:
    rows = latency_table(CELLS, LOADS).rows
    assert rows[0][-2:] == ["+0.50", "+0.50"]
    assert rows[1][-2:] == ["-17.00", "-17.00"]


def test_batching_reports_the_mean_batch_and_the_batched_share() -> None:
    row = batching_table(CELLS, LOADS).rows[1]
    assert row[3:11] == ["300", "900", "3.00", "3.2", "80%", "6", "20", "1"]
