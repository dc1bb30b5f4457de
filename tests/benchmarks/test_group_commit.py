"""The batching counters a cell reports: taken apart around the measured admissions."""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.group_commit import SETTINGS, Batching


@dataclass
class _Stats:
    """Shaped like the ledger's stats dataclass (the five counters the brief names)."""

    batches: int
    batched_admissions: int
    largest_batch: int
    solo_admissions: int
    split_batches: int


def test_a_cell_counts_only_what_happened_after_its_warm_up() -> None:
    before = Batching.of(_Stats(4, 10, 3, 2, 0))
    after = Batching.of(_Stats(24, 110, 7, 5, 1))
    cell = after.since(before)
    assert cell == Batching(20, 100, 7, 3, 1)
    assert cell.mean_batch == 5.0
    assert cell.share(125) == 0.8


def test_nothing_batched_is_a_mean_of_zero_not_a_division_error() -> None:
    empty = Batching()
    assert empty.mean_batch == 0.0
    assert empty.share(0) == 0.0
    assert Batching(2, 6, 4, 0, 0).share(8) == 0.75


def test_off_is_one_admission_per_batch_and_on_is_the_ledgers_default() -> None:
    assert SETTINGS["off"] == {"max_batch": 1, "max_wait_ms": 0.0}
    assert SETTINGS["on"] is None
