"""The savepoint batch executor on the database under test: an item that does not finish leaves
no trace in the open transaction, and a real deadlock inside a batch costs only its own item
(PostgreSQL: the savepoint survives the victim statement) or splits the batch (MariaDB: the whole
transaction is rolled back). SQLite has a single writer and cannot deadlock: its failure of that
kind is the write lock held by another connection (busy), which splits the batch the same way.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.sql import batch_savepoints
from fleetgate.adapters.sql.batch_items import BatchItem, Outcome
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.errors import LedgerUnavailable
from fleetgate.domain.capacity.model import AdmitRequest, NodeSpec
from tests.adapters.sql.test_concurrency import assert_counters_match_placements
from tests.adapters.sql.test_group_commit import placed, placed_events, wait_for_lock_wait
from tests.conftest import Backend
from tests.ledgers import open_ledger
from tests.waiting import until

BIG = Capacity(16, 65536, 1000)


@pytest.fixture
async def ledger(backend: Backend, clock: VirtualClock) -> AsyncIterator[SqlLedger]:
    """The shared ledger fixture, admitting in-process on PostgreSQL too.

    Like ``admission_function: false``: these tests are of the savepoint executor, and the
    PostgreSQL function's own batch executor is tested with it.
    """
    async with open_ledger(backend, clock) as opened:
        opened.one_call = False
        yield opened


def req(node: str, size: Resources = Resources(1, 1, 1), **kw: Any) -> AdmitRequest:
    return AdmitRequest("team", node, size, **kw)


async def state(ledger: SqlLedger) -> tuple[Any, ...]:
    return (await ledger.nodes(), await ledger.cluster(), await ledger.placements())


async def test_items_that_do_not_finish_leave_nothing_in_the_transaction(
    ledger: SqlLedger,
) -> None:
    await ledger.add_node(NodeSpec("a", BIG))
    await ledger.add_node(NodeSpec("small", Capacity(1, 1024, 10)))
    earlier = await ledger.admit(req("a", request_id="earlier"))
    assert earlier.admitted
    before = await state(ledger)
    items = [
        BatchItem(req("small", Resources(4, 1, 1)), "p-refused"),
        BatchItem(req("a", request_id="earlier"), "p-duplicate"),
        BatchItem(req("nowhere"), "p-nowhere"),
    ]

    async def work(conn: AsyncConnection) -> list[Any]:
        results = await batch_savepoints.admit_each(
            conn, items, ledger.store.now_epoch(), ledger.enforcement
        )
        # Still usable after three rolled-back savepoints: one more item admits.
        more = BatchItem(req("a", Resources(2, 2, 2)), "p-ok", placed)
        results += [
            await batch_savepoints.admit_one(
                conn, more, ledger.store.now_epoch(), ledger.enforcement
            )
        ]
        raise Rollback(results)

    class Rollback(Exception):
        def __init__(self, results: list[Any]) -> None:
            self.results = results

    with pytest.raises(Rollback) as rolled:
        await ledger.store.write(work, what="test batch", retry=False)
    outcomes = [r.outcome for r in rolled.value.results]
    assert outcomes == [Outcome.REFUSED, Outcome.DUPLICATE, Outcome.NO_NODE, Outcome.ADMITTED]
    refused = rolled.value.results[0]
    assert refused.denial is not None and refused.denial.exceeded == {"cpus"}
    ok = rolled.value.results[3]
    assert ok.admission.placement.id == "p-ok" and len(ok.events) == 1
    assert await state(ledger) == before  # the test rolled the whole transaction back

    async def commit_them(conn: AsyncConnection) -> list[Any]:
        return await batch_savepoints.admit_each(
            conn,
            [*items, BatchItem(req("a", Resources(2, 2, 2)), "p-ok")],
            ledger.store.now_epoch(),
            ledger.enforcement,
        )

    await ledger.store.write(commit_them, what="test batch", retry=False)
    # Only the admitted item's writes committed; the others' savepoints undid theirs.
    assert sorted(p.id for p in await ledger.placements()) == sorted(["p-ok", earlier.placement.id])  # type: ignore[union-attr]
    await assert_counters_match_placements(ledger)


# --- a real deadlock inside a batch ----------------------------------------------------------


@asynccontextmanager
async def reopened(ledger: SqlLedger, **options: Any) -> AsyncIterator[SqlLedger]:
    """The same database through a ledger with extra options (the first one closed)."""
    await ledger.close()
    again = SqlLedger(
        ledger.url,
        dict(ledger.options, migrate=False, **options),
        ledger.store.dialect,
        ledger.store.clock,
    )
    await again.start()
    again.one_call = False  # the savepoint executor (the function's batch is another's)
    try:
        yield again
    finally:
        await again.close()


def outside_engine(backend: Backend) -> AsyncEngine:
    """An outside session; on PostgreSQL one that leaves deadlock detection to the batch."""
    if backend.kind == "postgres":
        return create_async_engine(
            backend.url, connect_args={"server_settings": {"deadlock_timeout": "60s"}}
        )
    return create_async_engine(backend.url)


async def test_a_deadlocked_item_leaves_the_rest_of_its_batch_committed(
    ledger: SqlLedger, backend: Backend
) -> None:
    if backend.kind == "sqlite":
        pytest.skip("SQLite has one writer and cannot deadlock: see the busy test below")
    for name in ("a", "b", "c"):
        await ledger.add_node(NodeSpec(name, BIG))
    await ledger.add_node(NodeSpec("small", Capacity(1, 1024, 10)))
    earlier = await ledger.admit(req("b", request_id="earlier"), audit=placed)
    assert earlier.placement is not None
    # PostgreSQL: the batch's session finds the deadlock (after 5 s of waiting, long enough for
    # the outside session to close the cycle on a loaded machine); the outside one never looks.
    options: dict[str, Any] = {}
    if backend.kind == "postgres":
        options["engine"] = {"connect_args": {"server_settings": {"deadlock_timeout": "5s"}}}
    async with reopened(ledger, **options) as ledger:
        outside = outside_engine(backend)
        try:
            async with outside.connect() as other:
                if backend.kind == "mariadb":
                    # Heavier than the batch, so InnoDB picks the batch as the victim.
                    await other.execute(
                        sa.text(
                            "INSERT INTO events (at, kind, subject, namespace, level, data)"
                            " VALUES (0, 'ballast', 'x', NULL, 'info', '{}')"
                        ),
                        [{}] * 300,
                    )
                await other.execute(
                    sa.text("UPDATE nodes SET updated_at = updated_at WHERE name = 'c'")
                )
                batch = [
                    req("a", Resources(2, 2, 2)),  # admitted: holds node a
                    req("small", Resources(4, 1, 1)),  # refused
                    req("c", Resources(3, 3, 3)),  # waits for c, which the outside holds
                    req("b", Resources(5, 5, 5), request_id="earlier"),  # a repeat
                    req("b", Resources(1, 1, 1)),  # admitted
                ]
                admitting = asyncio.gather(*(ledger.admit(r, audit=placed) for r in batch))
                await wait_for_lock_wait(backend.url, backend.kind)
                # Close the cycle: the outside asks for node a, which the batch holds.
                await other.execute(
                    sa.text("UPDATE nodes SET updated_at = updated_at WHERE name = 'a'")
                )
                await other.rollback()  # releases c: the deadlocked item can run alone now
                results = await admitting
        finally:
            await outside.dispose()
        stats = ledger.group_commit_stats()
        assert stats.batches == 1 and stats.largest_batch == len(batch)
        if backend.kind == "postgres":
            # The savepoint survived the victim statement: only item c ran again, alone.
            assert stats.split_batches == 0 and stats.solo_admissions == 1
        else:
            # MariaDB rolled the whole batch back: every item was admitted alone.
            assert stats.split_batches == 1 and stats.solo_admissions == len(batch)
        first, refused, deadlocked, repeat, last = results
        assert first.admitted and deadlocked.admitted and last.admitted
        assert not refused.admitted and refused.denial is not None
        assert repeat.replayed and repeat.placement == earlier.placement
        ids = sorted(r.placement.id for r in (earlier, first, deadlocked, last) if r.placement)
        assert sorted(p.id for p in await ledger.placements()) == ids
        assert await placed_events(ledger) == {i: 1 for i in ids}
        used = {n.name: n.used for n in await ledger.nodes()}
        assert used == {
            "a": Resources(2, 2, 2),
            "b": Resources(2, 2, 2),
            "c": Resources(3, 3, 3),
            "small": Resources(),
        }
        await assert_counters_match_placements(ledger)


async def test_sqlite_busy_from_another_writer_splits_the_batch(
    ledger: SqlLedger, backend: Backend
) -> None:
    if backend.kind != "sqlite":
        pytest.skip("the write lock held by another connection is SQLite's own failure")
    await ledger.add_node(NodeSpec("a", BIG))
    async with reopened(ledger, busy_timeout_ms=200) as ledger:
        path = ledger.store.engine.url.database
        assert path is not None
        holder = sqlite3.connect(path, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")  # the write lock, as another process would hold it
            admitting = asyncio.gather(*(ledger.admit(req("a"), audit=placed) for _ in range(4)))
            # Until the batch has given up (after its 200 ms busy timeout), however long that
            # takes on this machine; its items then retry alone, once the lock is released.
            await until(lambda: ledger.group_commit_stats().split_batches == 1)
            holder.execute("ROLLBACK")
            results = await admitting
        finally:
            holder.close()
        stats = ledger.group_commit_stats()
        assert stats.batches == 1 and stats.split_batches == 1 and stats.solo_admissions == 4
        assert all(r.admitted for r in results)
        ids = sorted(r.placement.id for r in results if r.placement is not None)
        assert sorted(p.id for p in await ledger.placements()) == ids
        assert await placed_events(ledger) == {i: 1 for i in ids}
        await assert_counters_match_placements(ledger)


async def test_sqlite_savepoints_work_under_begin_immediate(
    backend: Backend, clock: VirtualClock
) -> None:
    """aiosqlite with the dialect's own BEGIN IMMEDIATE: a rolled-back savepoint undoes its rows."""
    async with open_ledger(backend, clock) as ledger:
        await ledger.add_node(NodeSpec("a", BIG))

        async def work(conn: AsyncConnection) -> list[str]:
            seen = []
            nested = await conn.begin_nested()
            await conn.execute(sa.text("UPDATE nodes SET used_cpus = 7 WHERE name = 'a'"))
            await nested.rollback()
            async with conn.begin_nested():
                await conn.execute(sa.text("UPDATE nodes SET used_disk_gb = 5 WHERE name = 'a'"))
            row = (await conn.execute(sa.text("SELECT used_cpus, used_disk_gb FROM nodes"))).one()
            seen.append(f"{row[0]},{row[1]}")
            return seen

        assert await ledger.store.write(work, what="savepoints") == ["0,5"]
        node = await ledger.node("a")
        assert node is not None and node.used == Resources(0, 0, 5)


# --- a connection lost inside a batch (issue 34) -----------------------------------------------


async def test_a_connection_lost_inside_a_batch_ends_it_at_once(
    ledger: SqlLedger, backend: Backend
) -> None:
    """The item meeting the lost connection does not try its savepoint on the dead connection.

    Before, its ``ROLLBACK TO SAVEPOINT`` met SQLAlchemy's "Can't reconnect until invalid
    transaction is rolled back" (PendingRollbackError, no lost connection to the retry logic).
    Now the lost connection itself goes up: nothing of the batch committed, and the next
    transaction runs on a fresh connection.
    """
    from tests.adapters.sql.test_faults import after_first, killer_of

    await ledger.add_node(NodeSpec("a", BIG))
    before = await state(ledger)
    items = [BatchItem(req("a"), f"p-{i}") for i in range(3)]
    killer, cut = killer_of(backend)
    hook = after_first(ledger, "UPDATE NODES", cut)

    async def work(conn: AsyncConnection) -> list[Any]:
        return await batch_savepoints.admit_each(
            conn, items, ledger.store.now_epoch(), ledger.enforcement
        )

    try:
        with pytest.raises(Exception) as raised:
            await ledger.store.write(work, what="test batch", retry=False)
    finally:
        sa.event.remove(ledger.store.engine.sync_engine, "after_cursor_execute", hook)
        if killer is not None:
            await killer.dispose()
    error = raised.value
    assert not isinstance(error, sa.exc.PendingRollbackError), error
    assert "rolled back" not in str(error), error
    # What the retry logic and the group committer know as a lost connection.
    assert (isinstance(error, sa.exc.DBAPIError) and error.connection_invalidated) or isinstance(
        error, LedgerUnavailable
    ), repr(error)
    assert await state(ledger) == before
    assert (await ledger.admit(req("a"))).admitted
