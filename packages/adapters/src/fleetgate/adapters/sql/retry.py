"""Bounded, jittered retries of transactions the database aborted to resolve a conflict.

Deadlocks, lock-wait timeouts, snapshot conflicts, serialization failures and SQLite's busy
lock are not failures of the request: the whole transaction is run again, at most ``attempts``
times with exponential backoff and jitter (``base × 2^n × U(0.5, 1.5)``). When the budget is
spent the caller gets ``LedgerUnavailable`` naming the last error — never a generic error later.

A connection the database side dropped (killed, restarted, timed out) is retried too, at once
and on a fresh connection (SQLAlchemy retires the pool's older connections when it sees one
die): the transaction never reached its COMMIT, so the server rolled it back and running it
again cannot apply it twice. A connection lost *during* the COMMIT is not retried — whether it
committed is unknown — and never reaches here: the store reports it as ``LedgerUnavailable``.

A single server aborts few transactions, so four tries suffice. A multi-primary Galera cluster
aborts many more: every transaction that wrote a row another node wrote at the same time fails
certification (1213) at its COMMIT, and under contention several times in a row. There the
budget is a deadline (:class:`RetryBudget` with ``deadline`` set): run again, with jittered
backoff growing to a cap, until the deadline has passed — sized so a burst of conflicts on the
rows every admission writes is absorbed instead of being returned as a storm of 503s.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy.exc import DBAPIError

from fleetgate.adapters.sql.answers import NotAnswering
from fleetgate.domain.capacity.errors import LedgerUnavailable

T = TypeVar("T")
ATTEMPTS = 4
BASE_DELAY = 0.005
#: The multi-primary defaults: retry for up to 5 s, backoff growing from 5 ms to at most 250 ms.
DEADLINE = 5.0
MAX_DELAY = 0.25

_log = logging.getLogger("fleetgate.ledger")


@dataclass(frozen=True)
class RetryBudget:
    """How long a conflicting transaction is run again.

    ``attempts`` bounds the runs; with ``deadline`` (seconds from the first run) set, retries
    stop once the next wait would end past it, whichever comes first. Each wait is
    ``min(cap, base × 2^n) × U(0.5, 1.5)``.
    """

    attempts: int = ATTEMPTS
    base: float = BASE_DELAY
    deadline: float | None = None
    cap: float = MAX_DELAY

    @classmethod
    def multi_primary(
        cls, deadline: float = DEADLINE, base: float = BASE_DELAY, cap: float = MAX_DELAY
    ) -> RetryBudget:
        """The budget for a cluster whose every node takes writes (Galera): by deadline."""
        return cls(attempts=1_000_000, base=base, deadline=deadline, cap=cap)

    def describe(self) -> str:
        """The budget as an error message names it."""
        if self.deadline is None:
            return f"{self.attempts} attempts"
        return f"{self.deadline:g} s of retries"


def backoff(
    attempt: int, rng: random.Random, base: float = BASE_DELAY, cap: float | None = None
) -> float:
    """Seconds to wait before attempt ``attempt + 1`` (``attempt`` counts from 0)."""
    grown = base * (2 ** min(attempt, 30))
    if cap is not None:
        grown = min(grown, cap)
    return float(grown * rng.uniform(0.5, 1.5))


async def with_retries(
    run: Callable[[], Awaitable[T]],
    *,
    retryable: Callable[[DBAPIError], bool],
    what: str,
    attempts: int = ATTEMPTS,
    budget: RetryBudget | None = None,
    rng: random.Random | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """Run ``run`` until it succeeds, retrying only errors ``retryable`` accepts.

    ``budget`` (default: ``attempts`` tries with the single-server backoff) bounds the retries.
    """
    rng = rng or random.Random()
    budget = budget or RetryBudget(attempts=attempts)
    started = clock()
    lost_count = 0
    for attempt in range(budget.attempts):
        try:
            return await run()
        except DBAPIError as exc:
            lost = exc.connection_invalidated
            if not lost and not retryable(exc):
                raise
            lost_count += lost
            delay = 0.0 if lost else backoff(attempt, rng, budget.base, budget.cap)
            spent = attempt + 1 == budget.attempts or (
                budget.deadline is not None and clock() - started + delay > budget.deadline
            )
            # A lost connection is retried at once, but never more often than the fixed
            # attempts: a database that is gone stays a quick 503, whatever the deadline.
            if spent or lost_count >= ATTEMPTS:
                if lost:
                    raise NotAnswering(
                        f"{what}: lost the database connection {lost_count} times: {exc.orig}"
                    ) from exc
                raise LedgerUnavailable(
                    f"{what}: gave up after {attempt + 1} attempts ({budget.describe()}), the "
                    f"database kept aborting the transaction ({exc.orig})"
                ) from exc
            if lost:
                _log.info("retrying %s on a fresh connection after %s", what, exc.orig)
                continue
            _log.info("retrying %s after %s (attempt %d)", what, exc.orig, attempt + 1)
            await sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises
