"""Jittered retries within a time budget: which errors, for how long, and the clear error at
the end. Time is virtual (a fake clock and sleep): nothing here waits on the wall clock."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError

from fleetgate.adapters import plugins
from fleetgate.adapters.sql.retry import LOST_TRIES, RetryBudget, backoff, with_retries
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.errors import LedgerUnavailable
from fleetgate.domain.capacity.model import AdmitRequest, NodeSpec


class Orig(Exception):
    """Stands in for a driver error carrying an errno."""


def deadlock() -> OperationalError:
    return OperationalError("UPDATE ...", {}, Orig(1213, "Deadlock found"))


async def no_sleep(_: float) -> None:
    return None


class VirtualTime:
    """A clock the retries read and a sleep that advances it: no wall-clock time passes."""

    def __init__(self) -> None:
        self.now = 0.0
        self.delays: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.delays.append(seconds)
        self.now += seconds


async def test_a_retryable_error_is_retried_until_it_succeeds() -> None:
    calls = []

    async def run() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise deadlock()
        return "done"

    result = await with_retries(run, retryable=lambda e: True, what="admit", sleep=no_sleep)
    assert result == "done" and len(calls) == 3


async def test_a_conflict_is_retried_until_the_deadline_then_raises_ledger_unavailable() -> None:
    time = VirtualTime()
    calls = []

    async def run() -> None:
        calls.append(1)
        raise deadlock()

    with pytest.raises(
        LedgerUnavailable, match=r"admit onto a: gave up after \d+ attempts \(5 s of retries\)"
    ):
        await with_retries(
            run,
            retryable=lambda e: True,
            what="admit onto a",
            sleep=time.sleep,
            clock=time.clock,
            rng=random.Random(3),
        )
    # Far more than the four tries that answered 503 under claim churn (issue 45), and never a
    # wait past the deadline; the backoff grows, then stops at its cap (250 ms, jittered).
    assert len(calls) > 4 * LOST_TRIES and len(time.delays) == len(calls) - 1
    assert time.now <= 5.0
    assert time.delays[0] < time.delays[4] and max(time.delays) <= 1.5 * 0.25
    # The next wait would have ended past the deadline: nothing of the budget was left unused.
    assert time.now > 5.0 - 1.5 * 0.25


async def test_a_conflict_that_clears_within_the_budget_is_never_seen_by_the_caller() -> None:
    time = VirtualTime()
    calls = []

    async def run() -> str:
        calls.append(1)
        if len(calls) < 9:  # more losses in a row than the old fixed four attempts allowed
            raise deadlock()
        return "done"

    result = await with_retries(
        run, retryable=lambda e: True, what="release", sleep=time.sleep, clock=time.clock
    )
    assert result == "done" and len(calls) == 9 and time.now < 5.0


async def test_a_budget_with_a_count_stops_at_the_count_before_its_deadline() -> None:
    time = VirtualTime()
    calls = []

    async def run() -> None:
        calls.append(1)
        raise deadlock()

    budget = RetryBudget(attempts=3)
    with pytest.raises(LedgerUnavailable, match=r"gave up after 3 attempts"):
        await with_retries(
            run, retryable=lambda e: True, what="x", budget=budget, sleep=time.sleep,
            clock=time.clock,
        )  # fmt: skip
    assert len(calls) == 3 and time.now < 5.0


def lost() -> OperationalError:
    return OperationalError(
        "UPDATE ...", {}, Orig(2013, "Lost connection"), connection_invalidated=True
    )


async def test_a_lost_connection_is_retried_at_once_on_a_fresh_one() -> None:
    calls = []
    delays: list[float] = []

    async def run() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise lost()
        return "done"

    async def sleep(seconds: float) -> None:
        delays.append(seconds)

    # Retried although ``retryable`` refuses the error: a lost connection is always worth it.
    result = await with_retries(run, retryable=lambda e: False, what="admit", sleep=sleep)
    assert result == "done" and len(calls) == 3 and delays == []


async def test_a_connection_lost_on_every_attempt_raises_ledger_unavailable() -> None:
    calls = []

    async def run() -> None:
        calls.append(1)
        raise lost()

    with pytest.raises(LedgerUnavailable, match=r"admit: lost the database connection 4 times"):
        await with_retries(run, retryable=lambda e: False, what="admit", sleep=no_sleep)
    assert len(calls) == LOST_TRIES


async def test_other_errors_are_not_retried() -> None:
    calls = []

    async def run() -> None:
        calls.append(1)
        raise deadlock()

    with pytest.raises(OperationalError):
        await with_retries(run, retryable=lambda e: False, what="x", sleep=no_sleep)
    assert len(calls) == 1


def test_backoff_is_jittered_within_half_to_one_and_a_half() -> None:
    rng = random.Random(1)
    for attempt in range(4):
        for _ in range(50):
            assert 0.5 * 0.005 * 2**attempt <= backoff(attempt, rng) <= 1.5 * 0.005 * 2**attempt


async def test_a_busy_sqlite_database_is_retried_then_reported(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'busy.db'}"
    options = {"busy_timeout_ms": 20, "retry": {"deadline_seconds": 0.3}}
    ledger = plugins.make_ledger(plugins.plugin_manager(), url, options)
    await ledger.start()
    await ledger.add_node(NodeSpec("a", Capacity(4, 100, 10)))
    holder = sqlite3.connect(tmp_path / "busy.db", isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock throughout
        with pytest.raises(LedgerUnavailable, match=r"gave up after \d+ attempts \(0.3 s of"):
            await ledger.admit(AdmitRequest("team", "a", Resources(1, 1, 1)))
        holder.execute("ROLLBACK")
        assert (await ledger.admit(AdmitRequest("team", "a", Resources(1, 1, 1)))).admitted
    finally:
        holder.close()
        await ledger.close()


async def test_a_deadline_budget_retries_far_past_four_attempts_until_its_deadline() -> None:
    time = VirtualTime()
    calls = []

    async def run() -> None:
        calls.append(1)
        raise deadlock()

    budget = RetryBudget.multi_primary(deadline=2.0, base=0.005, cap=0.1)
    with pytest.raises(LedgerUnavailable, match=r"gave up after \d+ attempts \(2 s of retries\)"):
        await with_retries(
            run,
            retryable=lambda e: True,
            what="admit",
            budget=budget,
            sleep=time.sleep,
            clock=time.clock,
            rng=random.Random(7),
        )
    assert len(calls) > 4 * LOST_TRIES
    assert time.now <= 2.0  # never slept past the deadline
    assert max(time.delays) <= 1.5 * 0.1  # the backoff stops growing at its cap


async def test_a_deadline_budget_succeeds_after_many_certification_failures() -> None:
    time = VirtualTime()
    calls = []

    async def run() -> str:
        calls.append(1)
        if len(calls) < 12:
            raise deadlock()
        return "done"

    result = await with_retries(
        run,
        retryable=lambda e: True,
        what="admit",
        budget=RetryBudget.multi_primary(),
        sleep=time.sleep,
        clock=time.clock,
    )
    assert result == "done" and len(calls) == 12


async def test_a_lost_connection_stays_a_quick_failure_under_a_deadline_budget() -> None:
    calls = []

    async def run() -> None:
        calls.append(1)
        raise lost()

    with pytest.raises(LedgerUnavailable, match=r"lost the database connection 4 times"):
        await with_retries(
            run,
            retryable=lambda e: False,
            what="admit",
            budget=RetryBudget.multi_primary(),
            sleep=no_sleep,
        )
    assert len(calls) == LOST_TRIES


@pytest.mark.parametrize(
    ("mode", "galera", "by_deadline"),
    [
        ("auto", False, False),
        ("auto", True, True),
        ("on", False, True),
        ("off", True, False),
    ],
)
def test_the_store_retries_by_deadline_on_a_multi_primary_cluster(
    mode: str, galera: bool, by_deadline: bool
) -> None:
    from fleetgate.adapters.sql.dialect import DialectSupport
    from fleetgate.adapters.sql.engine import Store

    dialect = DialectSupport()
    dialect.multi_primary = galera  # what the MariaDB plugin sets once it sees wsrep_on=ON
    retry = {
        "attempts": 6,
        "base_delay_ms": 2.0,
        "deadline_seconds": 4.0,
        "max_delay_ms": 50.0,
        "multi_primary": mode,
        "multi_primary_deadline_seconds": 3.0,
        "multi_primary_max_delay_ms": 100.0,
    }
    store = Store("mysql+aiomysql://root@127.0.0.1/x", {"retry": retry}, dialect)
    budget = store.budget()
    if by_deadline:
        assert budget == RetryBudget.multi_primary(deadline=3.0, base=0.002, cap=0.1)
    else:
        assert budget == RetryBudget(attempts=6, base=0.002, deadline=4.0, cap=0.05)
    # Writers are serialized per process only where transactions abort one another.
    assert store._serialize_for_certification() is by_deadline
