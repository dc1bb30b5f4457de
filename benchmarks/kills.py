"""Every connection of the ledger killed, again and again, while writers admit and release.

The fault suite's other half (``faults`` kills one statement of one admission): here 16 writers
admit (each admission with its audit event) and release for a while, every connection of the
ledger's database is killed from the server side eight times (MariaDB ``KILL``, PostgreSQL
``pg_terminate_backend``; on SQLite the next statements find their connection closed under
them), and the load goes on after the last kill as long as it ran before the first. What it
measures:

- the longest wait after the last kill: for every operation still running or started after it,
  from the later of its start and the kill to its answer;
- the failures after the last kill (an operation started after it that did not succeed);
- unknown outcomes (a COMMIT cut off: the only answer a kill may cause, and only at it);
- the audit check: one ``placed`` event in the events table for each admission that committed,
  none for one that did not.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from rich.console import Console
from sqlalchemy.ext.asyncio import create_async_engine

from benchmarks.report import Table
from benchmarks.targets import Target, fresh_database
from fleetgate.adapters import plugins
from fleetgate.adapters.clock import SystemClock
from fleetgate.adapters.sql.engine import CommitUnknown
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.adapters.sql.schema import events, placements
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.model import Admission, AdmitRequest, NodeSpec
from fleetgate.domain.events import Event, Level

WRITERS = 16
KILLS = 8
#: Seconds between kills, and of load after the last one.
SPACING = 0.75
AFTER = 3.0
NAMESPACE = "kills"
#: The other sessions on the ledger's database, and how to end one from the server side.
SESSIONS = {
    "mariadb": "SELECT id FROM information_schema.processlist"
    " WHERE db = DATABASE() AND id <> CONNECTION_ID()",
    "postgres": "SELECT pid FROM pg_stat_activity"
    " WHERE datname = current_database() AND pid <> pg_backend_pid()",
}
KILL = {"mariadb": "KILL {id}", "postgres": "SELECT pg_terminate_backend({id})"}
_BORN = "fleetgate_kills_born"
_CUT = "fleetgate_kills_cut"


@dataclass
class Op:
    """One admission or release: when it ran and what it came to."""

    started: float
    kind: str = "admit"  # admit | release
    ended: float = 0.0
    outcome: str = "ok"  # ok | unknown | failed: <error class>


@dataclass
class KillRun:
    """What one run of kills under load came to."""

    backend: str
    writers: int = WRITERS
    kills: int = KILLS
    after: float = AFTER
    ops: list[Op] = field(default_factory=list)
    killed: int = 0
    first_kill: float = 0.0
    last_kill: float = 0.0
    committed: int = 0
    events: int = 0
    #: Admissions answered with an error (unknown outcome or failure) that had committed.
    unknown_committed: int = 0
    #: Of those, answered as failed (not unknown): must be none.
    failed_committed: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def longest_after(self) -> float:
        """The longest any operation waited after the last kill."""
        return max(
            (
                o.ended - max(o.started, self.last_kill)
                for o in self.ops
                if o.ended > self.last_kill
            ),
            default=0.0,
        )

    @property
    def longest_before(self) -> float:
        """The longest operation of the load before the first kill: the machine's yardstick."""
        return max((o.ended - o.started for o in self.ops if o.ended < self.first_kill), default=0)

    @property
    def failed_after(self) -> int:
        """Operations started after the last kill that did not succeed."""
        return sum(1 for o in self.ops if o.started > self.last_kill and o.outcome != "ok")

    @property
    def unknown(self) -> int:
        """Operations answered "outcome unknown" (a COMMIT cut off by a kill)."""
        return sum(1 for o in self.ops if o.outcome == "unknown")

    @property
    def failed(self) -> int:
        """Operations that failed otherwise (anywhere in the run)."""
        return sum(1 for o in self.ops if o.outcome.startswith("failed"))

    @property
    def audit_ok(self) -> bool:
        """One audit event per committed admission."""
        return self.events == self.committed

    @property
    def clean(self) -> bool:
        """Nothing failed after the last kill, nothing answered as failed had committed, and
        the audit trail is exact. A failure during the kills is a 503 a client retries (the
        retries of a lost connection can meet the next kill on a slow machine); the waits are
        reported beside their yardstick, not judged: a speed bound would fail a correct run on
        a loaded machine."""
        return self.failed_after == 0 and self.audit_ok and not self.failed_committed


def placed(admission: Admission) -> list[Event]:
    """The admission's audit event, written in its transaction."""
    assert admission.placement is not None
    return [
        Event(
            "placed",
            admission.placement.admitted_at,
            admission.placement.id,
            NAMESPACE,
            Level.INFO,
            {},
        )
    ]


async def kill_sessions(url: str, kind: str) -> int:
    """Kill every other session on the database of ``url``; how many there were."""
    killer = create_async_engine(url, poolclass=sa.pool.NullPool)
    try:
        async with killer.connect() as conn:
            victims = [int(v) for (v,) in await conn.execute(sa.text(SESSIONS[kind]))]
            for victim in victims:
                # A session may end by itself between the listing and its kill.
                with contextlib.suppress(sa.exc.DBAPIError):
                    await conn.execute(sa.text(KILL[kind].format(id=victim)))
            await conn.commit()
        return len(victims)
    finally:
        await killer.dispose()


class SqliteCutter:
    """SQLite's kill: every connection opened before it is closed under its next statement.

    As on a server, where a kill ends every session at once: the ones in a transaction fail
    their next statement, the idle ones fail when next used.
    """

    def __init__(self, ledger: SqlLedger) -> None:
        self.engine = ledger.store.engine.sync_engine
        self.since = float("-inf")
        self.cut = 0
        sa.event.listen(self.engine, "connect", self._born)
        sa.event.listen(self.engine, "before_cursor_execute", self._cut)

    @staticmethod
    def _born(_dbapi: Any, record: Any) -> None:
        record.info[_BORN] = time.monotonic()

    def _cut(self, conn: Any, *_: Any) -> None:
        info = conn.connection.info
        if info.get(_BORN, 0.0) < self.since and not info.get(_CUT):
            info[_CUT] = True
            self.cut += 1
            conn.connection.dbapi_connection.close()

    def kill(self) -> None:
        """From now on, each connection older than now is closed at its next statement."""
        self.since = time.monotonic()

    def close(self) -> None:
        """Stop cutting."""
        sa.event.remove(self.engine, "connect", self._born)
        sa.event.remove(self.engine, "before_cursor_execute", self._cut)


async def run(
    ledger: SqlLedger,
    kind: str,
    url: str,
    *,
    writers: int = WRITERS,
    kills: int = KILLS,
    spacing: float = SPACING,
    after: float = AFTER,
    clock: Callable[[], float] = time.monotonic,
) -> KillRun:
    """Kills under load on ``ledger`` (whose database is ``url``), then the checks."""
    result = KillRun(kind, writers, kills, after)
    await ledger.add_node(NodeSpec("k", Capacity(4096, 1 << 24, 1 << 20)))
    stop = asyncio.Event()
    unsure: list[tuple[str, Op]] = []
    cutter = SqliteCutter(ledger) if kind == "sqlite" else None

    async def timed(operation: Any, kind: str) -> tuple[Any, Op]:
        op = Op(clock(), kind)
        result.ops.append(op)
        try:
            return await operation, op
        except CommitUnknown:
            op.outcome = "unknown"
            return None, op
        except Exception as exc:
            op.outcome = f"failed: {type(exc).__name__}"
            if len(result.errors) < 5:
                result.errors.append(f"{type(exc).__name__}: {exc}"[:200])
            return None, op
        finally:
            op.ended = clock()

    async def writer() -> None:
        while not stop.is_set():
            request_id = uuid.uuid4().hex
            request = AdmitRequest(NAMESPACE, "k", Resources(1, 1, 1), request_id=request_id)
            admitted, op = await timed(ledger.admit(request, audit=placed), "admit")
            if admitted is None:  # unknown, or failed: whether it committed is read below
                unsure.append((request_id, op))
                continue
            if admitted.placement is not None:
                result.committed += 1
                await timed(ledger.release(admitted.placement.id), "release")

    async def killer() -> None:
        # As long without kills first: the longest operation then is the loaded machine's
        # yardstick for the waits after the last kill.
        await asyncio.sleep(after - spacing)
        for _ in range(kills):
            await asyncio.sleep(spacing)
            if cutter is not None:
                cutter.kill()
            else:
                result.killed += await kill_sessions(url, kind)
            result.last_kill = clock()
            result.first_kill = result.first_kill or result.last_kill
        await asyncio.sleep(after)
        stop.set()

    try:
        await asyncio.gather(killer(), *(writer() for _ in range(writers)))
    finally:
        if cutter is not None:
            cutter.close()
            result.killed = cutter.cut
    # An admission answered with an error may have committed (an unknown outcome): it counts if
    # its row is there (the writer never released it, not knowing its id). One answered as
    # failed must not have: ``failed_committed`` says whether the ledger kept that promise.
    async with ledger.store.engine.connect() as conn:
        for request_id, op in unsure:
            found = await conn.execute(
                sa.select(sa.func.count()).where(placements.c.request_id == request_id)
            )
            rows = int(found.scalar_one())
            result.unknown_committed += rows
            if op.outcome != "unknown":
                result.failed_committed += rows
        counted = await conn.execute(sa.select(sa.func.count()).where(events.c.kind == "placed"))
        result.events = int(counted.scalar_one())
    result.committed += result.unknown_committed
    return result


async def run_target(target: Target, console: Console, *, tiny: bool = False) -> KillRun:
    """Kills under load on a fresh database of ``target``, the ledger as a deployment has it.

    ``tiny``: a few writers and kills, for the harness's smoke test.
    """
    sizes: dict[str, Any] = {"writers": 4, "kills": 2, "after": 1.0} if tiny else {}
    async with fresh_database(target) as url:
        options = target.ledger_options()
        # SQLAlchemy's default pool, as ``fleetgate api`` runs with (fewer connections than
        # writers: requests also wait for a connection).
        options.pop("engine", None)
        ledger = plugins.make_ledger(plugins.plugin_manager(), url, options, SystemClock())
        assert isinstance(ledger, SqlLedger)
        await ledger.start()
        try:
            with console.status(f"{target.label}: {KILLS} kills under {WRITERS} writers"):
                result = await run(ledger, target.kind, url, **sizes)
        finally:
            await ledger.close()
    result.backend = target.label
    console.print(
        f"  {target.label}: {len(result.ops)} operations, {result.killed} killed, longest wait "
        f"after the last kill {result.longest_after:.2f}s, failed after it {result.failed_after}, "
        f"audit {result.events}/{result.committed}"
    )
    return result


def table(results: Sequence[KillRun]) -> Table:
    """One row per backend."""
    shape = results[0] if results else KillRun("")
    t = Table(
        f"Every connection killed {shape.kills} times under {shape.writers} writers (admit with "
        f"an audit event, release), {shape.after:.0f} s of load before the first and after the "
        "last",
        [
            "backend",
            "operations",
            "connections killed",
            "longest operation before the first kill",
            "longest wait after the last kill",
            "failed after the last kill",
            "outcome unknown (COMMIT cut off)",
            "other failures (503, during the kills)",
            "audit events / admissions committed",
        ],
    )
    for r in results:
        t.add(
            r.backend,
            len(r.ops),
            r.killed,
            f"{r.longest_before:.2f} s",
            f"{r.longest_after:.2f} s",
            r.failed_after,
            r.unknown,
            r.failed if not r.failed_committed else f"{r.failed}, {r.failed_committed} COMMITTED",
            f"{r.events} / {r.committed}" + ("" if r.audit_ok else " MISMATCH"),
        )
    return t
