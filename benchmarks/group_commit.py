"""Group commit in the benchmarks: the two settings compared, and what the ledger says it batched.

Every ledger cell runs twice, side by side on the same seeded database: with group commit off
(``max_batch`` 1, one transaction per admission, the ledger as it was) and with the ledger's
default (on). The ledger counts what it batched (``SqlLedger.group_commit_stats()``); a cell
reads the counters before and after its measured admissions, so the warm-up is not in them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fleetgate.adapters.sql.ledger import SqlLedger

#: The ledger options of each setting: "off" turns batching off, "on" keeps the default.
SETTINGS: dict[str, dict[str, Any] | None] = {
    "off": {"max_batch": 1, "max_wait_ms": 0.0},
    "on": None,
}
MODES = tuple(SETTINGS)


@dataclass(frozen=True)
class Batching:
    """What the ledger batched over one measured cell."""

    batches: int = 0
    batched_admissions: int = 0
    #: The largest batch since the ledger opened (the cell's warm-up included: a maximum cannot
    #: be taken apart into before and after).
    largest_batch: int = 0
    solo_admissions: int = 0
    split_batches: int = 0

    @classmethod
    def of(cls, stats: Any) -> Batching:
        """The counters of the ledger's own stats object."""
        return cls(
            int(stats.batches),
            int(stats.batched_admissions),
            int(stats.largest_batch),
            int(stats.solo_admissions),
            int(stats.split_batches),
        )

    def since(self, before: Batching) -> Batching:
        """The counts between ``before`` and now (the largest batch stays the running one)."""
        return Batching(
            self.batches - before.batches,
            self.batched_admissions - before.batched_admissions,
            self.largest_batch,
            self.solo_admissions - before.solo_admissions,
            self.split_batches - before.split_batches,
        )

    @property
    def mean_batch(self) -> float:
        """Admissions per batch (0.0 when nothing was batched)."""
        return self.batched_admissions / self.batches if self.batches else 0.0

    def share(self, admissions: int) -> float:
        """The share of ``admissions`` (the cell's admit calls) that ran in a batch."""
        return min(1.0, self.batched_admissions / admissions) if admissions else 0.0


def stats(ledger: SqlLedger) -> Batching:
    """The ledger's group-commit counters so far."""
    return Batching.of(ledger.group_commit_stats())
