"""The claim-churn workload: writers placing and releasing in one namespace while its claim is
created and deleted, counting what the database aborted (retries) and what the caller lost (503).

Shared by the churn test and by the measurement quoted in ``docs/capacity.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.domain.capacity.claims import ClaimRequest
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.errors import LedgerUnavailable
from fleetgate.domain.capacity.model import AdmitRequest, NodeSpec

NAMESPACE = "churn"
NODES = tuple(f"c{i}" for i in range(4))
#: Placements each writer keeps before it releases its oldest: the namespace always holds some,
#: so every claim create has usage to migrate and releases race it.
KEEP = 3
#: Messages of the transaction retry that mean a deadlock (MariaDB 1213, PostgreSQL 40P01).
DEADLOCK_MARKERS = ("1213", "deadlock")


@dataclass
class Tally:
    """What one run did and what it cost."""

    placed: int = 0
    released: int = 0
    claims_created: int = 0
    claims_deleted: int = 0
    claim_refusals: list[str] = field(default_factory=list)
    unavailable: list[str] = field(default_factory=list)
    retries: int = 0
    deadlock_retries: int = 0
    #: Deadlock retries by operation ("admit", "release", "create claim"...).
    deadlocks_by: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def describe(self) -> str:
        """One line for a failure message or a measurement log."""
        return (
            f"placed={self.placed} released={self.released} claims created="
            f"{self.claims_created} deleted={self.claims_deleted} retries={self.retries} "
            f"(deadlocks {self.deadlock_retries}) 503s={len(self.unavailable)} "
            f"refusals={len(self.claim_refusals)} in {self.seconds:.1f}s; deadlocks in "
            f"{self.deadlocks_by}"
        )


class _RetryCounter(logging.Handler):
    def __init__(self, tally: Tally) -> None:
        super().__init__(logging.INFO)
        self.tally = tally

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if not message.startswith("retrying"):
            return
        self.tally.retries += 1
        if any(marker in message.lower() for marker in DEADLOCK_MARKERS):
            self.tally.deadlock_retries += 1
            what = " ".join(str(record.args[0]).split()[:2]) if record.args else "?"
            self.tally.deadlocks_by[what] = self.tally.deadlocks_by.get(what, 0) + 1


@contextlib.contextmanager
def counting_retries(tally: Tally) -> Iterator[None]:
    """Count the ledger's transaction retries (it logs each one) into ``tally``."""
    logger = logging.getLogger("fleetgate.ledger")
    handler = _RetryCounter(tally)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


async def seed(ledger: SqlLedger) -> None:
    """Nodes big enough that no admission of the run is refused for room."""
    for name in NODES:
        await ledger.add_node(NodeSpec(name, Capacity(256, 1 << 20, 1 << 14)))


async def _writer(ledger: SqlLedger, rng: random.Random, until: float, tally: Tally) -> None:
    held: list[str] = []
    while time.monotonic() < until:
        try:
            if len(held) < KEEP:
                request = AdmitRequest(NAMESPACE, rng.choice(NODES), Resources(1, 64, 1))
                admission = await ledger.admit(request)
                assert admission.placement is not None, admission.denial
                held.append(admission.placement.id)
                tally.placed += 1
            else:
                released = await ledger.release(held.pop(0))
                assert released.released
                tally.released += 1
        except LedgerUnavailable as exc:
            tally.unavailable.append(str(exc))
    for placement_id in held:
        await ledger.release(placement_id)


async def _claims(ledger: SqlLedger, interval: float, until: float, tally: Tally) -> None:
    limit = Resources(64, 1 << 16, 1 << 10)
    while time.monotonic() < until:
        try:
            outcome = await ledger.create_claim(ClaimRequest(NAMESPACE, limit, 3600))
            if outcome.claim is None:
                assert outcome.refusal is not None
                tally.claim_refusals.append(outcome.refusal.message)
                await asyncio.sleep(interval)
                continue
            tally.claims_created += 1
            await asyncio.sleep(interval)
            deletion = await ledger.delete_claim(outcome.claim.id)
            assert deletion.deleted
            tally.claims_deleted += 1
        except LedgerUnavailable as exc:
            tally.unavailable.append(str(exc))
        await asyncio.sleep(interval)


async def run(
    ledger: SqlLedger,
    seconds: float,
    *,
    writers: int = 8,
    claim_interval: float | None = 0.15,
    seed_value: int = 21,
) -> Tally:
    """Run the workload for ``seconds``; ``claim_interval`` None runs the writers alone."""
    tally = Tally()
    rng = random.Random(seed_value)
    started = time.monotonic()
    until = started + seconds
    tasks = [_writer(ledger, random.Random(rng.random()), until, tally) for _ in range(writers)]
    if claim_interval is not None:
        tasks.append(_claims(ledger, claim_interval, until, tally))
    with counting_retries(tally):
        await asyncio.gather(*tasks)
    tally.seconds = time.monotonic() - started
    return tally
