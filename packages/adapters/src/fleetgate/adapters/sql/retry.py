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
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from sqlalchemy.exc import DBAPIError

from fleetgate.domain.capacity.errors import LedgerUnavailable

T = TypeVar("T")
ATTEMPTS = 4
BASE_DELAY = 0.005

_log = logging.getLogger("fleetgate.ledger")


def backoff(attempt: int, rng: random.Random, base: float = BASE_DELAY) -> float:
    """Seconds to wait before attempt ``attempt + 1`` (``attempt`` counts from 0)."""
    return float(base * (2**attempt) * rng.uniform(0.5, 1.5))


async def with_retries(
    run: Callable[[], Awaitable[T]],
    *,
    retryable: Callable[[DBAPIError], bool],
    what: str,
    attempts: int = ATTEMPTS,
    rng: random.Random | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """Run ``run`` until it succeeds, retrying only errors ``retryable`` accepts."""
    rng = rng or random.Random()
    for attempt in range(attempts):
        try:
            return await run()
        except DBAPIError as exc:
            lost = exc.connection_invalidated
            if not lost and not retryable(exc):
                raise
            if attempt + 1 == attempts:
                if lost:
                    raise LedgerUnavailable(
                        f"{what}: lost the database connection {attempts} times: {exc.orig}"
                    ) from exc
                raise LedgerUnavailable(
                    f"{what}: gave up after {attempts} attempts, the database kept aborting the "
                    f"transaction ({exc.orig})"
                ) from exc
            if lost:
                _log.info("retrying %s on a fresh connection after %s", what, exc.orig)
                continue
            delay = backoff(attempt, rng)
            _log.info("retrying %s after %s (attempt %d)", what, exc.orig, attempt + 1)
            await sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises
