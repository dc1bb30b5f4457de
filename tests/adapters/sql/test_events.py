"""The audit trail: append-only, filtered reads in order, and a sink that never raises."""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum
from pathlib import Path

import pytest

from fleetgate.adapters.sql import plugin_sqlite
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.events import Event, Level
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
    broken = plugin_sqlite.plugin.fleetgate_make_ledger(url, {}, None, DemandPolicy())
    await broken.event_sink().emit([ev("lost")])  # unusable database: logged, not raised
