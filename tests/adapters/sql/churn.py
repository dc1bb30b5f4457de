"""The claim-churn workload: writers placing and releasing in their namespaces while each
namespace's claim is created and deleted (and, optionally, reconcile passes run), counting what
the database aborted (retries) and what the caller lost (503).

Shared by the churn tests and by the measurements quoted in ``docs/capacity.md`` and
``docs/performance.md``: ``python -m tests.adapters.sql.churn --seconds 40 --runs 3`` runs issue
45's workload on ``FLEETGATE_TEST_DATABASE_URL`` (a database of its own per run).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import random
import secrets
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

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
#: Issue 45's workload: 12 writers over two namespaces, each namespace's claim created and
#: deleted every 0.15 s, a reconcile pass every 0.5 s.
ISSUE_45: dict[str, Any] = {
    "writers": 12,
    "namespaces": ("churn-a", "churn-b"),
    "claim_interval": 0.15,
    "reconcile_interval": 0.5,
}
#: Messages of the transaction retry that mean a deadlock (MariaDB 1213, PostgreSQL 40P01).
DEADLOCK_MARKERS = ("1213", "deadlock")


@dataclass
class Tally:
    """What one run did and what it cost."""

    placed: int = 0
    released: int = 0
    claims_created: int = 0
    claims_deleted: int = 0
    reconciles: int = 0
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
            f"{self.claims_created} deleted={self.claims_deleted} reconciles={self.reconciles} "
            f"retries={self.retries} "
            f"(deadlocks {self.deadlock_retries}) 503s={len(self.unavailable)} "
            f"refusals={len(self.claim_refusals)} in {self.seconds:.1f}s; deadlocks in "
            f"{self.deadlocks_by}"
        )

    @property
    def writes(self) -> int:
        """Every write the run made: placements, releases, claim writes and reconcile passes."""
        return (
            self.placed
            + self.released
            + self.claims_created
            + self.claims_deleted
            + self.reconciles
        )

    def per_thousand_writes(self, count: int) -> float:
        """``count`` per 1,000 writes of this run."""
        return 1000.0 * count / max(self.writes, 1)


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
            # The operation without its ids ("release", "admit onto", "delete claim").
            words = str(record.args[0]).split()[:3] if record.args else ["?"]
            what = " ".join(w for w in words if not any(c.isdigit() for c in w))
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


async def _writer(
    ledger: SqlLedger, namespace: str, rng: random.Random, until: float, tally: Tally
) -> None:
    held: list[str] = []
    while time.monotonic() < until:
        try:
            if len(held) < KEEP:
                request = AdmitRequest(namespace, rng.choice(NODES), Resources(1, 64, 1))
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


async def _claims(
    ledger: SqlLedger, namespace: str, interval: float, until: float, tally: Tally
) -> None:
    limit = Resources(64, 1 << 16, 1 << 10)
    while time.monotonic() < until:
        try:
            outcome = await ledger.create_claim(ClaimRequest(namespace, limit, 3600))
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


async def _reconciles(ledger: SqlLedger, interval: float, until: float, tally: Tally) -> None:
    while time.monotonic() < until:
        try:
            await ledger.reconcile()
            tally.reconciles += 1
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
    namespaces: tuple[str, ...] = (NAMESPACE,),
    reconcile_interval: float | None = None,
) -> Tally:
    """Run the workload for ``seconds``; ``claim_interval`` None runs the writers alone.

    Writers are dealt round the ``namespaces``; each namespace has its own claim churn; with
    ``reconcile_interval`` a reconcile pass runs that often too.
    """
    tally = Tally()
    rng = random.Random(seed_value)
    started = time.monotonic()
    until = started + seconds
    tasks = [
        _writer(ledger, namespaces[i % len(namespaces)], random.Random(rng.random()), until, tally)
        for i in range(writers)
    ]
    if claim_interval is not None:
        tasks += [_claims(ledger, ns, claim_interval, until, tally) for ns in namespaces]
    if reconcile_interval is not None:
        tasks.append(_reconciles(ledger, reconcile_interval, until, tally))
    with counting_retries(tally):
        await asyncio.gather(*tasks)
    tally.seconds = time.monotonic() - started
    return tally


#: Sessions idle in a transaction while another session waits for a lock they hold: a
#: transaction holding a row lock while its process does something else. One row per such
#: session: which transaction (PostgreSQL: its backend and the start of its transaction;
#: MariaDB: its trx_id), which of its statements it is idle after (PostgreSQL: that statement's
#: start; MariaDB: its QUERY_ID), and the statement's text where the server keeps it.
IDLE_BLOCKERS = {
    "postgres": (
        "SELECT DISTINCT b.pid || '@' || b.xact_start, b.query_start::text, b.query"
        " FROM pg_stat_activity w"
        " CROSS JOIN LATERAL unnest(pg_blocking_pids(w.pid)) AS blocker(pid)"
        " JOIN pg_stat_activity b ON b.pid = blocker.pid"
        " WHERE w.datname = current_database() AND b.state = 'idle in transaction'"
    ),
    "mariadb": (
        "SELECT DISTINCT CAST(t.trx_id AS CHAR), CAST(p.QUERY_ID AS CHAR), ''"
        " FROM information_schema.INNODB_LOCK_WAITS w"
        " JOIN information_schema.INNODB_TRX t ON t.trx_id = w.blocking_trx_id"
        " JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id"
        " WHERE p.COMMAND = 'Sleep' AND p.DB = DATABASE()"
    ),
}


@dataclass
class IdleBlockers:
    """Samples of sessions idle in transaction while holding a lock another session waits for.

    ``longest_run``: in how many consecutive samples one transaction was seen so after the same
    statement (a duration: it counts the server's and the client's scheduling too); ``steps``:
    for each transaction, the statements it was seen so after (a count: never more than the
    statements it sent, however busy the machine).
    """

    samples: int = 0
    seen: int = 0
    #: How often each last statement (its first words) was the one a blocker idled after.
    after: dict[str, int] = field(default_factory=dict)
    longest_run: int = 0
    longest: str = ""
    most_steps: int = 0
    _run: dict[tuple[str, str], int] = field(default_factory=dict)
    #: Each transaction's statements it was seen idle after, and their texts.
    steps: dict[str, set[str]] = field(default_factory=dict)
    texts: dict[str, set[str]] = field(default_factory=dict)

    def note(self, found: list[tuple[str, str, str]]) -> None:
        """One sample: each idle blocker's transaction, statement and text."""
        self.samples += 1
        runs = {}
        for transaction, statement, query in found:
            self.seen += 1
            words = " ".join(str(query).split()[:6])
            self.after[words] = self.after.get(words, 0) + 1
            key = (transaction, statement)
            runs[key] = self._run.get(key, 0) + 1
            if runs[key] > self.longest_run:
                self.longest_run, self.longest = runs[key], f"{transaction} after {words}"
            steps = self.steps.setdefault(transaction, set())
            steps.add(statement)
            self.texts.setdefault(transaction, set()).add(" ".join(str(query).split()))
            self.most_steps = max(self.most_steps, len(steps))
        self._run = runs

    def describe(self) -> str:
        """The counts, the most frequent last statements first."""
        ranked = sorted(self.after.items(), key=lambda item: -item[1])
        lines = [
            f"  idle in transaction, blocking another: {self.seen} in {self.samples} samples;"
            f" longest run {self.longest_run} ({self.longest}); at most {self.most_steps}"
            " statements of one transaction"
        ]
        lines += [f"    {count:6d} after {query}" for query, count in ranked[:12] if query]
        return "\n".join(lines)


async def sample_idle_blockers(url: str, kind: str, until: float, found: IdleBlockers) -> None:
    """Sample ``IDLE_BLOCKERS`` every 20 ms until ``until`` (monotonic), on its own session."""
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    query = text(IDLE_BLOCKERS[kind])
    engine = create_async_engine(url, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            while time.monotonic() < until:
                rows = (await conn.execute(query)).all()
                found.note([(str(a), str(b), str(c)) for a, b, c in rows])
                await asyncio.sleep(0.02)
    finally:
        await engine.dispose()


async def _measure(url: str, kind: str, variables: dict[str, str], seconds: float) -> Tally:
    from tests.conftest import Backend
    from tests.ledgers import open_ledger

    async with open_ledger(Backend(url, kind, variables)) as ledger:
        await seed(ledger)
        if kind not in IDLE_BLOCKERS:
            return await run(ledger, seconds, **ISSUE_45)
        idle = IdleBlockers()
        sampler = sample_idle_blockers(url, kind, time.monotonic() + seconds, idle)
        tally, _ = await asyncio.gather(run(ledger, seconds, **ISSUE_45), sampler)
        print(idle.describe())
        return tally


def main() -> None:
    """Run issue 45's workload ``--runs`` times on ``FLEETGATE_TEST_DATABASE_URL``."""
    from tests.backends import create_database, drop_database, server_for

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    server_url = os.environ.get("FLEETGATE_TEST_DATABASE_URL", "")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    for number in range(1, args.runs + 1):
        if not server_url or server_url.startswith("sqlite"):
            with tempfile.TemporaryDirectory() as directory:
                url = f"sqlite+aiosqlite:///{directory}/churn.db"
                tally = asyncio.run(_measure(url, "sqlite", {}, args.seconds))
        else:
            server = server_for(server_url)
            name = f"fgchurn_{os.getpid()}_{secrets.token_hex(3)}"
            url = create_database(server_url, name)
            try:
                variables = server.session_variables()
                tally = asyncio.run(_measure(url, server.kind, variables, args.seconds))
            finally:
                drop_database(server_url, name)
        deadlocks = tally.per_thousand_writes(tally.deadlock_retries)
        print(
            f"run {number} at {commit}, load {os.getloadavg()[0]:.2f}: 503s="
            f"{len(tally.unavailable)} writes={tally.writes} deadlock retries per 1000 writes="
            f"{deadlocks:.1f}; {tally.describe()}",
            flush=True,
        )
        for message in tally.unavailable[:5]:
            print(f"  503: {message}", flush=True)


if __name__ == "__main__":
    main()
