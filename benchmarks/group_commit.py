"""Group commit in the benchmarks: the two settings compared, and what the ledger says it batched.

Every ledger cell runs twice, side by side on the same seeded database: with group commit off
(``max_batch`` 1, one transaction per admission, the ledger as it was) and with the ledger's
default (on). The ledger counts what it batched (``SqlLedger.group_commit_stats()``); a cell
reads the counters before and after its measured admissions, so the warm-up is not in them.
"""

from __future__ import annotations

from typing import Any

from fleetgate.adapters.sql.group_commit import GroupCommitStats
from fleetgate.adapters.sql.ledger import SqlLedger

#: The ledger options of each setting: "off" turns batching off, "on" keeps the default.
SETTINGS: dict[str, dict[str, Any] | None] = {
    "off": {"max_batch": 1, "max_wait_ms": 0.0},
    "on": None,
}
MODES = tuple(SETTINGS)


#: What the ledger batched over one measured cell: the ledger's own counters, taken apart
#: around the cell (``since``). Its largest batch is the running one since the ledger opened
#: (a maximum cannot be taken apart into before and after).
Batching = GroupCommitStats


def share(batching: Batching, admissions: int) -> float:
    """The share of ``admissions`` (the cell's admit calls) that ran in a batch."""
    return min(1.0, batching.batched_admissions / admissions) if admissions else 0.0


def stats(ledger: SqlLedger) -> Batching:
    """The ledger's group-commit counters so far."""
    return ledger.group_commit_stats()
