"""A connection killed at each statement of the admission transaction, and the retry after it.

The statements of one admission (with a request id, so it can be retried safely) are numbered
as SQLAlchemy's cursor events see them. For every statement ``i`` and for "just before" and
"just after" it, an admission runs with a hook that kills its connection at that point: MariaDB
``KILL CONNECTION`` and PostgreSQL ``pg_terminate_backend`` from a second connection, and on
SQLite the connection is closed under the transaction. Then:

- no partial state: the failed admission left either nothing (every counter as before, no row)
  or, had it committed, exactly its own row with counters to match — never anything between;
- the retry with the same request id admits exactly once (one row for the request, counters
  equal to the recomputation from the placements).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from rich.console import Console
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.util import await_only

from benchmarks.invariants import check
from benchmarks.report import Table
from benchmarks.seed import open_ledger
from benchmarks.targets import Target, fresh_database
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.adapters.sql.schema import cluster, nodes, placements
from fleetgate.domain.capacity.dimensions import ALLOCATION, Capacity, Resources
from fleetgate.domain.capacity.model import AdmitRequest, NodeSpec

SIZE = Resources(1, 512, 5)
WHEN = ("before", "after")


@dataclass
class Case:
    """One kill and what followed."""

    index: int
    statement: str
    when: str
    error: str = ""
    rows_after_fault: int = 0
    partial: bool = False
    rows_after_retry: int = 0
    retry: str = ""
    checks_ok: bool = True

    @property
    def good(self) -> bool:
        """No partial state, and the retry admitted exactly once."""
        return not self.partial and self.rows_after_retry == 1 and self.checks_ok


@dataclass
class FaultResult:
    """Every case of one backend."""

    backend: str
    statements: list[str] = field(default_factory=list)
    cases: list[Case] = field(default_factory=list)
    lost_reply: str = ""

    @property
    def partial(self) -> int:
        """Cases that left partial state."""
        return sum(1 for c in self.cases if c.partial or not c.checks_ok)

    @property
    def doubled(self) -> int:
        """Cases whose retry left more than one row."""
        return sum(1 for c in self.cases if c.rows_after_retry > 1)

    @property
    def lost(self) -> int:
        """Cases whose retry left no row."""
        return sum(1 for c in self.cases if c.rows_after_retry == 0)


def _words(statement: str) -> str:
    return " ".join(statement.split()[:3])[:40]


class Killer:
    """Kills the connection a cursor event fired on (from the event's own greenlet)."""

    def __init__(self, target: Target, url: str) -> None:
        self.kind = target.kind
        self.admin: AsyncEngine | None = None
        if self.kind != "sqlite":
            self.admin = create_async_engine(url, isolation_level="AUTOCOMMIT", poolclass=None)

    async def _run(self, statement: str) -> None:
        assert self.admin is not None
        async with self.admin.connect() as conn:
            await conn.execute(sa.text(statement))

    async def _wait_gone(self, thread_id: int) -> None:
        assert self.admin is not None
        for _ in range(100):
            async with self.admin.connect() as conn:
                found = await conn.execute(
                    sa.text("SELECT COUNT(*) FROM information_schema.processlist WHERE id = :id"),
                    {"id": thread_id},
                )
                if found.scalar_one() == 0:
                    return
            await asyncio.sleep(0.02)

    def kill(self, conn: Any) -> None:
        """Kill the server side of ``conn`` (a sync Connection inside a cursor event)."""
        adapted = conn.connection.dbapi_connection
        if self.kind == "sqlite":
            adapted.close()
            return
        driver = adapted.driver_connection
        if self.kind == "postgres":
            pid = int(driver.get_server_pid())
            await_only(self._run(f"SELECT pg_terminate_backend({pid}, 5000)"))
        else:
            thread_id = int(driver.server_thread_id[0])
            await_only(self._run(f"KILL CONNECTION {thread_id}"))
            await_only(self._wait_gone(thread_id))

    async def close(self) -> None:
        """Dispose of the admin engine."""
        if self.admin is not None:
            await self.admin.dispose()


def _hook(seen: list[str], trigger: Callable[[Any, int, str], None]) -> tuple[Any, Any]:
    def before(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)
        trigger(conn, len(seen) - 1, "before")

    def after(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        trigger(conn, len(seen) - 1, "after")

    return before, after


async def _admit_with(
    ledger: SqlLedger, request: AdmitRequest, trigger: Callable[[Any, int, str], None]
) -> tuple[list[str], str]:
    """Admit with the hooks installed; return the statements seen and the error (or outcome)."""
    engine = ledger.store.engine.sync_engine
    seen: list[str] = []
    before, after = _hook(seen, trigger)
    sa.event.listen(engine, "before_cursor_execute", before)
    sa.event.listen(engine, "after_cursor_execute", after)
    try:
        admission = await ledger.admit(request)
        outcome = "admitted" if admission.placement is not None else "refused"
    except Exception as exc:  # what a killed connection raises is the finding
        outcome = f"error: {type(exc).__name__}"
    finally:
        sa.event.remove(engine, "before_cursor_execute", before)
        sa.event.remove(engine, "after_cursor_execute", after)
    return seen, outcome


async def _counters(ledger: SqlLedger) -> tuple[Any, ...]:
    async with ledger.store.engine.connect() as conn:
        used = await conn.execute(
            sa.select(nodes.c.name, *(nodes.c[f"used_{d}"] for d in ALLOCATION)).order_by(
                nodes.c.name
            )
        )
        totals = await conn.execute(
            sa.select(*(cluster.c[f"unclaimed_used_{d}"] for d in ALLOCATION))
        )
        return (tuple(used.all()), tuple(totals.all()))


async def _rows(ledger: SqlLedger, request_id: str) -> int:
    async with ledger.store.engine.connect() as conn:
        found = await conn.execute(
            sa.select(sa.func.count()).where(placements.c.request_id == request_id)
        )
        return int(found.scalar_one())


async def run_target(target: Target, console: Console) -> FaultResult:
    """Every statement, before and after, on one backend; then the lost-reply case."""
    result = FaultResult(target.label)
    async with (
        fresh_database(target) as url,
        open_ledger(target, url) as ledger,
        open_ledger(target, url) as observer,
    ):
        for name in ("fault-a", "fault-b"):
            await ledger.add_node(NodeSpec(name, Capacity(64, 1 << 20, 1 << 16)))
        probe = AdmitRequest("faults", "fault-a", SIZE, demand=0.6, target_load=0.75)
        statements, _ = await _admit_with(
            ledger, AdmitRequest(**{**probe.__dict__, "request_id": "probe"}), lambda *a: None
        )
        result.statements = [_words(s) for s in statements]
        killer = Killer(target, url)
        try:
            for index in range(len(statements)):
                for when in WHEN:
                    with console.status(f"{target.label}: kill {when} statement {index}"):
                        result.cases.append(
                            await _case(ledger, observer, killer, probe, index, when, result)
                        )
        finally:
            await killer.close()
        request = AdmitRequest(**{**probe.__dict__, "request_id": "lost-reply"})
        first = await ledger.admit(request)
        again = await ledger.admit(request)
        rows = await _rows(ledger, "lost-reply")
        result.lost_reply = (
            f"first {'admitted' if first.placement else 'refused'}, repeat "
            f"{'replayed' if again.replayed else 'admitted again'}, {rows} row(s)"
        )
    console.print(
        f"  {target.label}: {len(result.cases)} kills over {len(result.statements)} statements, "
        f"partial {result.partial}, lost {result.lost}, doubled {result.doubled}"
    )
    return result


async def _case(
    ledger: SqlLedger,
    observer: SqlLedger,
    killer: Killer,
    probe: AdmitRequest,
    index: int,
    when: str,
    result: FaultResult,
) -> Case:
    """One kill; everything is verified through ``observer``, a second ledger of its own."""
    request_id = f"kill-{index}-{when}"
    request = AdmitRequest(**{**probe.__dict__, "request_id": request_id})
    case = Case(index, result.statements[index], when)
    before = await _counters(observer)
    fired = [False]

    def trigger(conn: Any, i: int, moment: str) -> None:
        if not fired[0] and i == index and moment == when:
            fired[0] = True
            killer.kill(conn)

    _, case.error = await _admit_with(ledger, request, trigger)
    if not fired[0]:
        case.error += " (statement not reached)"
    case.rows_after_fault = await _rows(observer, request_id)
    found = await check(observer)
    case.partial = case.rows_after_fault > 1 or (
        case.rows_after_fault == 0 and await _counters(observer) != before
    )
    case.checks_ok = found.ok
    for _ in range(3):
        retry = await _admit_with(ledger, request, lambda *a: None)
        case.retry = retry[1]
        if not case.retry.startswith("error"):
            break
    case.rows_after_retry = await _rows(observer, request_id)
    case.checks_ok = case.checks_ok and (await check(observer)).ok
    return case


def summary(results: list[FaultResult]) -> Table:
    """One row per backend."""
    t = Table(
        "Connection killed at each statement of an admission, then the retry",
        [
            "backend",
            "statements",
            "kills",
            "errors seen",
            "partial states",
            "retries admitted once",
            "lost",
            "doubled",
            "reply lost after commit",
        ],
    )
    for r in results:
        errors = sorted({c.error for c in r.cases})
        once = sum(1 for c in r.cases if c.rows_after_retry == 1)
        t.add(
            r.backend,
            len(r.statements),
            len(r.cases),
            "; ".join(errors),
            r.partial,
            f"{once}/{len(r.cases)}",
            r.lost,
            r.doubled,
            r.lost_reply,
        )
    return t


def detail(result: FaultResult) -> Table:
    """Each statement of one backend with what a kill before and after it did."""
    t = Table(
        f"{result.backend}: the admission's statements and each kill",
        ["#", "statement", "kill before", "kill after"],
    )
    by = {(c.index, c.when): c for c in result.cases}
    for i, statement in enumerate(result.statements):
        cells = []
        for when in WHEN:
            c = by[(i, when)]
            state = "no partial state" if not c.partial and c.checks_ok else "PARTIAL STATE"
            cells.append(f"{c.error}; {state}; retry {c.retry}, {c.rows_after_retry} row(s)")
        t.add(i, statement, *cells)
    return t
