"""The audit trail: append-only, filtered reads in order, and a sink that never raises."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta
from enum import Enum, IntEnum, StrEnum
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from fleetgate.adapters.sql.engine import CommitUnknown
from fleetgate.adapters.sql.events import WRITER_TASK
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.adapters.sql.schema import events as events_table
from fleetgate.adapters.sql.sqlite import plugin as sqlite_plugin
from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.capacity.errors import LedgerUnavailable
from fleetgate.domain.events import Event, Level
from tests.adapters.sql.test_faults import after_first, first_commit_answer_lost, killer_of
from tests.conftest import Backend
from tests.ledgers import START


class Colour(StrEnum):
    RED = "red"


def ev(kind: str, subject: str = "p-1", namespace: str | None = "team", **data: object) -> Event:
    return Event(kind, START, subject, namespace, Level.WARNING, dict(data))


async def test_events_come_back_in_order_with_their_data(ledger: SqlLedger) -> None:
    await ledger.record_events([ev("one", n=1), ev("two", when=START, colour=Colour.RED)])
    got = await ledger.events()
    assert [r.event.kind for r in got] == ["one", "two"] and got[0].id < got[1].id
    assert got[0].event == ev("one", n=1)
    assert got[1].event.data == {"when": START.isoformat(), "colour": "red"}
    assert got[1].as_dict()["level"] == "warning"


async def test_filters_and_paging(ledger: SqlLedger) -> None:
    await ledger.record_events(
        [ev("a", "p-1"), ev("b", "p-2"), ev("a", "p-3", namespace="other"), ev("a", "", None)]
    )
    assert [r.event.subject for r in await ledger.events(kind="a")] == ["p-1", "p-3", ""]
    assert [r.event.kind for r in await ledger.events(namespace="team")] == ["a", "b"]
    assert [r.event.kind for r in await ledger.events(subject="p-2")] == ["b"]
    first = await ledger.events(limit=2)
    rest = await ledger.events(after_id=first[-1].id)
    assert [r.event.subject for r in first + rest] == ["p-1", "p-2", "p-3", ""]
    with pytest.raises(ValueError, match="limit"):
        await ledger.events(limit=1001)


async def test_the_sink_writes_through_and_swallows_failures(
    ledger: SqlLedger, tmp_path: Path
) -> None:
    sink = ledger.event_sink()
    await sink.emit([ev("kept", at=START + timedelta(seconds=1))])
    assert [r.event.kind for r in await ledger.events()] == ["kept"]
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    url = f"sqlite+aiosqlite:///{blocker}/x.db"
    broken = sqlite_plugin.plugin.fleetgate_make_ledger(url, {}, None, DemandPolicy())
    await broken.event_sink().emit([ev("lost")])  # unusable database: logged, not raised


# One serialization: what the table holds is what the old plain copy made -------------------


class Shade(Enum):
    DARK = 1


class Rank(IntEnum):
    HIGH = 3


def old_plain(data: dict[str, Any]) -> dict[str, Any]:
    """What ``_row`` bound before: a plain copy, which the JSON column then serialized."""

    def jsonable(value: object) -> str:
        return value.isoformat() if isinstance(value, datetime) else str(value)

    loaded: dict[str, Any] = json.loads(json.dumps(data, default=jsonable))
    return loaded


RICH: dict[str, Any] = {
    "when": START,
    "colour": Colour.RED,
    "shade": Shade.DARK,
    "rank": Rank.HIGH,
    "nested": {"list": [1, 2.5, None, True, {"at": START + timedelta(hours=1)}], "t": (1, "x")},
    1: "int key",
    2.5: "float key",
    False: "bool key",
    None: "null key",
    "é ☃ \u2028": ["unicode", -0.1, 1e300],
    "big": 2**70,
}


async def test_the_table_holds_the_json_the_plain_copy_gave(ledger: SqlLedger) -> None:
    await ledger.record_events([Event("rich", START, "p-1", "team", Level.INFO, RICH)])
    async with ledger.store.engine.connect() as conn:
        stored = (await conn.execute(sa.select(sa.cast(events_table.c.data, sa.Text)))).scalar()
    assert stored == json.dumps(old_plain(RICH))  # byte for byte
    (got,) = await ledger.events()
    assert got.event.data == old_plain(RICH)


async def test_keys_that_collide_as_strings_read_back_as_the_plain_copy_made_them(
    ledger: SqlLedger,
) -> None:
    # The one difference in the stored text: both keys are kept (the copy kept the last one);
    # JSON readers, ours included, keep the last of equal keys, so what is read is the same.
    data: dict[Any, Any] = {1: "int", "x": 0, "1": "str"}
    await ledger.record_events([Event("dup", START, "p-1", "team", Level.INFO, data)])
    (got,) = await ledger.events()
    assert got.event.data == old_plain(data) == {"1": "str", "x": 0}
    assert list(got.event.data) == list(old_plain(data))


# Group commit of events recorded on their own -----------------------------------------------


def commits_of(ledger: SqlLedger) -> list[int]:
    """The COMMITs the ledger's engine makes from now on (a count, in a one-item list)."""
    count = [0]

    def commit(_conn: Any) -> None:
        count[0] += 1

    sa.event.listen(ledger.store.engine.sync_engine, "commit", commit)
    return count


def caller_events(caller: int, n: int = 3) -> list[Event]:
    return [ev(f"e{i}", f"caller-{caller}", seq=i, when=START) for i in range(n)]


async def assert_each_once_in_order(ledger: SqlLedger, callers: Sequence[int], n: int = 3) -> None:
    got = await ledger.events(limit=1000)
    seen = Counter((r.event.subject, r.event.kind) for r in got)
    assert seen == Counter((f"caller-{c}", f"e{i}") for c in callers for i in range(n))
    for c in callers:
        mine = [r for r in got if r.event.subject == f"caller-{c}"]
        assert [r.event.data["seq"] for r in sorted(mine, key=lambda r: r.id)] == list(range(n))


def no_writer_left() -> bool:
    return all(t.get_name() != WRITER_TASK for t in asyncio.all_tasks())


async def test_concurrent_records_share_transactions(ledger: SqlLedger) -> None:
    commits = commits_of(ledger)
    sink = ledger.event_sink()
    calls = [sink.emit(caller_events(c)) for c in range(16)]
    calls += [ledger.record_events(caller_events(c)) for c in range(16, 32)]
    await asyncio.gather(*calls)
    assert 1 <= commits[0] < 32  # counted before the reads below, which commit too
    await assert_each_once_in_order(ledger, range(32))
    assert no_writer_left()


async def test_a_lone_record_is_one_transaction(ledger: SqlLedger) -> None:
    commits = commits_of(ledger)
    for c in range(3):
        await ledger.record_events(caller_events(c))
    assert commits[0] == 3 and no_writer_left()
    await assert_each_once_in_order(ledger, range(3))


def unwritable(caller: int) -> list[Event]:
    """A good event, then one whose data cannot be JSON (a tuple key): the caller's batch fails."""
    return [*caller_events(caller, 1), ev("bad", f"caller-{caller}", **{"k": {(1, 2): "x"}})]


async def test_a_failed_group_lands_every_other_caller_once(ledger: SqlLedger) -> None:
    commits = commits_of(ledger)
    results = await asyncio.gather(
        *(ledger.record_events(unwritable(c) if c == 3 else caller_events(c)) for c in range(8)),
        return_exceptions=True,
    )
    assert isinstance(results[3], sa.exc.StatementError) and "keys must be" in str(results[3])
    assert [r for i, r in enumerate(results) if i != 3] == [None] * 7
    assert commits[0] == 7  # the group committed nothing; each good caller then alone
    await assert_each_once_in_order(ledger, [c for c in range(8) if c != 3])
    # The sink still swallows its caller's failure, and still writes the others.
    await asyncio.gather(ledger.event_sink().emit(unwritable(9)), sink_emit(ledger, 10))
    await assert_each_once_in_order(ledger, [c for c in range(8) if c != 3] + [10])


async def sink_emit(ledger: SqlLedger, caller: int) -> None:
    await ledger.event_sink().emit(caller_events(caller))


@pytest.mark.parametrize("when", ["before", "after"])
async def test_a_connection_lost_in_a_group_loses_and_doubles_nothing(
    ledger: SqlLedger, backend: Backend, when: str
) -> None:
    """Killed before the group's INSERT: nothing committed, so every caller's events are written
    alone. Killed after it, the loss shows first at the COMMIT: unknown, reported to every
    caller of the group and never run again (as one caller's ``record`` is answered)."""
    killer, cut = killer_of(backend)
    hook = after_first(ledger, "INSERT INTO EVENTS", cut, when=when)
    try:
        results = await asyncio.gather(
            *(ledger.record_events(caller_events(c)) for c in range(8)), return_exceptions=True
        )
    finally:
        sa.event.remove(ledger.store.engine.sync_engine, f"{when}_cursor_execute", hook)
        if killer is not None:
            await killer.dispose()
    if when == "before":
        assert results == [None] * 8
        await assert_each_once_in_order(ledger, range(8))
        return
    assert all(isinstance(r, LedgerUnavailable) and "commit" in str(r) for r in results)
    assert await ledger.events() == []  # killed before its COMMIT: rolled back, not retried


@pytest.mark.parametrize("lost", [True, False], ids=["connection-lost", "other-error"])
async def test_a_group_whose_commit_answer_fails_is_never_run_again(
    ledger: SqlLedger, lost: bool
) -> None:
    with first_commit_answer_lost(ledger, lost) as commits:
        results = await asyncio.gather(
            *(ledger.record_events(caller_events(c)) for c in range(8)), return_exceptions=True
        )
    assert commits == [True]  # the group's one COMMIT, and nothing after it
    assert all(isinstance(r, CommitUnknown) for r in results)
    await assert_each_once_in_order(ledger, range(8))  # it did commit: once, not twice


async def test_a_caller_that_stops_waiting_loses_no_one_elses_events(ledger: SqlLedger) -> None:
    tasks = [asyncio.create_task(ledger.record_events(caller_events(c))) for c in range(6)]
    await asyncio.sleep(0)  # every caller queued; the writer has not taken them yet
    tasks[2].cancel()  # before its group is taken: never written

    def cancel_in_flight(*_: Any) -> None:
        tasks[4].cancel()  # its group is taken: it commits with it

    sa.event.listen(ledger.store.engine.sync_engine, "before_cursor_execute", cancel_in_flight)
    try:
        results = await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        sa.event.remove(ledger.store.engine.sync_engine, "before_cursor_execute", cancel_in_flight)
    assert [isinstance(r, asyncio.CancelledError) for r in results] == [
        False,
        False,
        True,
        False,
        True,
        False,
    ]
    await assert_each_once_in_order(ledger, [0, 1, 3, 4, 5])
    assert no_writer_left()
