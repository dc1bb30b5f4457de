"""The SQL one admission sends, captured once from the ledger, replayable without fleetgate.

An admission is run through the real ledger with SQLAlchemy's ``before_cursor_execute`` hook
recording every statement and its parameters exactly as they reach the driver. Values that vary
per admission (the node, the namespace, the placement id, the clock) were chosen to be
recognisable, so each parameter becomes either a constant or a named slot. The raw ceiling then
sends these very strings through the bare driver.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import event

from benchmarks import group_commit
from benchmarks.seed import SIZE, open_ledger
from benchmarks.targets import Target
from fleetgate.adapters.clock import VirtualClock
from fleetgate.domain.capacity.model import AdmitRequest

#: Recognisable values of the one captured admission (the node is the first seeded one).
NAMESPACE = "capture-ns"
PLACEMENT = "c0ffee00-0000-4000-8000-000000000001"
AT = datetime(2031, 7, 7, 7, 7, 7, 70707, tzinfo=UTC)
DEMAND = 0.6
TARGET_LOAD = 0.75


@dataclass(frozen=True)
class Slot:
    """A parameter that takes the current admission's value of ``name``."""

    name: str


@dataclass(frozen=True)
class Statement:
    """One captured statement: its text, its parameters, and whether it returns rows."""

    sql: str
    params: tuple[Any, ...]
    returns_rows: bool

    def bind(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        """The parameters with every slot filled from ``values``."""
        return tuple(values[p.name] if isinstance(p, Slot) else p for p in self.params)


@dataclass(frozen=True)
class Script:
    """What one admission sends, in order (SQLite's ``BEGIN IMMEDIATE`` included)."""

    kind: str
    statements: tuple[Statement, ...]

    def describe(self) -> list[str]:
        """The first words of each statement, for the report."""
        return [" ".join(s.sql.split()[:3]) for s in self.statements]


def _slot(value: Any, sentinels: Mapping[Any, str]) -> Any:
    if isinstance(value, str | float) and value in sentinels:
        return Slot(sentinels[value])
    return value


def _templated(statement: str, parameters: Any, sentinels: Mapping[Any, str]) -> Statement:
    params: Sequence[Any] = parameters if isinstance(parameters, list | tuple) else ()
    words = statement.lstrip().split(None, 1)
    returns_rows = bool(words) and (
        words[0].upper() == "SELECT" or "RETURNING" in statement.upper().split()
    )
    return Statement(statement, tuple(_slot(p, sentinels) for p in params), returns_rows)


async def capture_admission(
    target: Target, url: str, name: str, *, one_call: bool | None = None
) -> Script:
    """Run one admission onto node ``name`` through a ledger on ``url``; return what it sent.

    ``one_call`` False captures PostgreSQL's in-process statements instead of its function call.
    The placement it admits stays: the caller resets the database before measuring.
    """
    clock = VirtualClock(AT)
    # Group commit off: the script is one admission in one transaction, what a ceiling replays.
    off = group_commit.SETTINGS["off"]
    async with open_ledger(target, url, pool_size=1, clock=clock, group_commit=off) as ledger:
        if one_call is not None:
            ledger.one_call = one_call
        sentinels: dict[Any, str] = {
            name: "node",
            NAMESPACE: "namespace",
            PLACEMENT: "placement_id",
        }
        sentinels[ledger.store.now_epoch()] = "now"
        seen: list[Statement] = []

        def record(
            conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool
        ) -> None:
            seen.append(_templated(statement, parameters, sentinels))

        engine = ledger.store.engine.sync_engine
        event.listen(engine, "before_cursor_execute", record)
        try:
            admission = await ledger.admit(
                AdmitRequest(
                    namespace=NAMESPACE,
                    node=name,
                    resources=SIZE,
                    demand=DEMAND,
                    target_load=TARGET_LOAD,
                    placement_id=PLACEMENT,
                )
            )
        finally:
            event.remove(engine, "before_cursor_execute", record)
        if admission.placement is None:
            raise RuntimeError(f"the captured admission was refused: {admission.denial}")
    return Script(target.kind, tuple(seen))
