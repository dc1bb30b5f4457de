"""Jittered retries, within a time budget, of transactions the database aborted for a conflict.

Deadlocks, lock-wait timeouts, snapshot conflicts, serialization failures and SQLite's busy
lock are not failures of the request: the whole transaction is run again, with a backoff that
grows from ``base`` and stops growing at ``cap`` (``min(cap, base × 2^n) × U(0.5, 1.5)``), until
the budget's deadline has passed. When it is spent the caller gets ``LedgerUnavailable`` naming
the last error — never a generic error later.

The budget is a deadline, not a count, on every backend. Under contention (claim churn on
MariaDB, issue 45) a release or claim delete was picked as the deadlock victim four times in a
row and answered 503 although each retry was a few milliseconds of work: how many times a
transaction loses a race says nothing about whether the next run will win, how long the
conflicts have lasted does. A multi-primary Galera cluster, whose certification aborts are far
more frequent, has its own (``multi_primary``) budget of the same shape.

A connection the database side dropped (killed, restarted, timed out) is retried too, at once
and on a fresh connection (SQLAlchemy retires the pool's older connections when it sees one
die): the transaction never reached its COMMIT, so the server rolled it back and running it
again cannot apply it twice. That is bounded by a count (:data:`LOST_TRIES`), whatever the
deadline, so a database that is gone stays a 503 within seconds. A connection lost *during* the
COMMIT is not retried — whether it committed is unknown — and never reaches here: the store
reports it as ``LedgerUnavailable``.
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
#: Tries of a transaction whose connection was lost before its COMMIT, in all.
LOST_TRIES = 4
#: The most runs of one conflicting transaction; the deadline ends them long before.
MAX_ATTEMPTS = 100
BASE_DELAY = 0.005
#: The defaults: retry for up to 5 s, backoff growing from 5 ms to at most 250 ms.
DEADLINE = 5.0
MAX_DELAY = 0.25

_log = logging.getLogger("fleetgate.ledger")


@dataclass(frozen=True)
class RetryBudget:
    """How long a conflicting transaction is run again.

    Retries stop once the next wait would end past ``deadline`` (seconds from the first run)
    or ``attempts`` runs were made, whichever comes first (``deadline`` None: the count alone).
    Each wait is ``min(cap, base × 2^n) × U(0.5, 1.5)``.
    """

    attempts: int = MAX_ATTEMPTS
    base: float = BASE_DELAY
    deadline: float | None = DEADLINE
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
    budget: RetryBudget | None = None,
    rng: random.Random | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """Run ``run`` until it succeeds, retrying only errors ``retryable`` accepts.

    ``budget`` (default: :class:`RetryBudget`'s defaults) bounds the retries.
    """
    rng = rng or random.Random()
    budget = budget or RetryBudget()
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
            # count: a database that is gone stays a quick 503, whatever the deadline.
            if spent or lost_count >= LOST_TRIES:
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
