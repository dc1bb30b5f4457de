"""The batching a cell reports: the ledger's counters taken apart around the measured admissions."""

from __future__ import annotations

from benchmarks.group_commit import SETTINGS, Batching, share


def test_the_batched_share_is_of_the_cells_admit_calls() -> None:
    cell = Batching(20, 100, 7, 3, 1)
    assert share(cell, 125) == 0.8
    assert share(Batching(2, 6, 4, 0, 0), 8) == 0.75
    assert share(Batching(), 0) == 0.0  # nothing measured: 0, not a division error


def test_off_is_one_admission_per_batch_and_on_is_the_ledgers_default() -> None:
    assert SETTINGS["off"] == {"max_batch": 1, "max_wait_ms": 0.0}
    assert SETTINGS["on"] is None
