"""The lock order of every writing transaction, recorded from the statements the database runs.

``docs/capacity.md`` ("Lock order") writes down, for each writing transaction, the classes of
row locks it takes in order (decision 16): (1) existing placement rows, (2) claim rows,
(3) the cluster row, (4) node rows, (5) new rows (the placement an admission inserts, a
token), (6) audit events. A listener on the engine classifies every statement that locks a row
(``UPDATE``, ``DELETE``, ``INSERT``, ``SELECT … FOR UPDATE/SHARE``) by its table, per
transaction, while each operation runs alone; each transaction's classes must never go down,
except for the two documented steps that never wait (``NOWAIT``, ``SKIP LOCKED``) and for
statements on rows the transaction already holds (same table, keyed by values it locked
earlier: a move updating the placement it locked first, a read under its own lock).

On PostgreSQL the ledger runs with ``admission_function`` off, so the admission's statements
are sent one by one and recorded: the generated function runs exactly these statements, in
this order (decision 18), where no listener can see them.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.sql.elements import BindParameter
from sqlalchemy.sql.visitors import iterate

from fleetgate.adapters import plugins
from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.domain.capacity.claims import ClaimRequest, ClaimUpdate
from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.model import AdmitRequest, MoveRequest, NodeSpec
from fleetgate.domain.capacity.reservations import Reservation, ReservationRequest
from fleetgate.domain.events import Event
from tests.conftest import Backend
from tests.ledgers import START, empty

#: The lock classes of decision 16, by table; INSERT INTO placements is a new row (5).
#: Reservations are rows written only under their node's lock (issue 41): class 5, after it.
CLASSES = {
    "placements": 1,
    "claims": 2,
    "cluster": 3,
    "nodes": 4,
    "api_tokens": 5,
    "reservations": 5,
    "events": 6,
}
NEW_PLACEMENT = 5
_LOCKING = re.compile(r"^\s*(UPDATE|DELETE\s+FROM|INSERT\s+INTO)\s+(\w+)", re.IGNORECASE)
_FROM = re.compile(r"\bFROM\s+(\w+)", re.IGNORECASE)
_LOCKING_READ = re.compile(r"FOR\s+(UPDATE|SHARE|NO\s+KEY\s+UPDATE)|LOCK\s+IN\s+SHARE", re.I)
_NEVER_WAITS = re.compile(r"\bNOWAIT\b|\bSKIP\s+LOCKED\b", re.IGNORECASE)


@dataclass
class Lock:
    """One locking statement: its class, the values in its WHERE, whether it may not wait."""

    rank: int
    table: str
    where: str
    values: frozenset[Any]
    never_waits: bool
    sql: str


@dataclass
class Transaction:
    """The locking statements of one transaction, in order, under the operation's label."""

    label: str
    locks: list[Lock] = field(default_factory=list)

    def ranks(self) -> list[int]:
        """The classes as taken (consecutive repeats folded)."""
        folded: list[int] = []
        for lock in self.locks:
            if not folded or folded[-1] != lock.rank:
                folded.append(lock.rank)
        return folded

    def inversions(self) -> list[str]:
        """Each lock taken below a class already held that is neither documented nor held."""
        found = []
        for i, lock in enumerate(self.locks):
            before = self.locks[:i]
            if not before or lock.rank >= max(b.rank for b in before) or lock.never_waits:
                continue
            if not _held(lock, [b for b in before if b.table == lock.table]):
                found.append(f"class {lock.rank} after {max(b.rank for b in before)}: {lock.sql}")
        return found


def _held(lock: Lock, earlier: list[Lock]) -> bool:
    """Whether ``lock`` is on rows an earlier statement of the transaction already locked.

    The same WHERE with the same values; the cluster row (the table has one); a value in common
    with an earlier lock of the table (its key: a placement id, a claim's namespace or id, a
    node name, what a new row was inserted with); or an earlier lock of the table by a
    predicate with no values (the reconcile pass locks every active claim so) or by none at all
    (it locks every node so, before it ends the reservations it credits to them).
    """
    for e in earlier:
        if (e.where == lock.where and e.values == lock.values) or lock.table == "cluster":
            return True  # (the cluster table has one row)
        if e.values & lock.values or (not e.values and not e.never_waits):
            return True
    return False


def _where_of(context: Any, aliases: dict[Any, Any]) -> tuple[str, frozenset[Any]]:
    """The WHERE clause's text and the values bound into it (an INSERT: the values it inserts).

    A value with an alias (a claim's id: its namespace) stands for the alias too.
    """
    compiled = getattr(context, "compiled", None)
    statement = getattr(compiled, "statement", None)
    params = context.compiled_parameters[0] if context.compiled_parameters else {}
    values: set[Any] = set()
    if isinstance(statement, sa.Insert):
        values.update(v for v in params.values() if isinstance(v, str))
        where = None
    else:
        where = getattr(statement, "whereclause", None)
        for element in () if where is None else iterate(where):
            if isinstance(element, BindParameter):
                # The name it was compiled under: a cached statement's own values are stale. An
                # IN list's values are bound one by one, under that name and a suffix.
                name = compiled.bind_names.get(element, element.key)
                value = params.get(name)
                if value is None:
                    value = [v for k, v in params.items() if k.startswith(f"{name}_")]
                values.update(value if isinstance(value, list | tuple) else (value,))
    # Rows are keyed by strings (ids, names, namespaces): numbers (a guard's amounts, the
    # current instant) would make unrelated statements look alike.
    keys = {v for v in values if isinstance(v, str)}
    keys.update([aliases[v] for v in keys if v in aliases])
    return ("" if where is None else str(where)), frozenset(keys)


class Recorder:
    """Records each transaction's locking statements on one engine, labelled by operation."""

    def __init__(self) -> None:
        self.label = ""
        self.done: list[Transaction] = []
        #: Values that key the same row as another (a claim id and its namespace).
        self.aliases: dict[Any, Any] = {}
        self._open: dict[int, Transaction] = {}

    @contextmanager
    def during(self, label: str) -> Iterator[None]:
        """Label the transactions that begin meanwhile."""
        self.label = label
        try:
            yield
        finally:
            self.label = ""

    def _begin(self, conn: Any) -> None:
        self._open[id(conn.connection.dbapi_connection)] = Transaction(self.label)

    def _end(self, conn: Any) -> None:
        transaction = self._open.pop(id(conn.connection.dbapi_connection), None)
        if transaction is not None and transaction.label and transaction.locks:
            self.done.append(transaction)

    def _statement(self, conn: Any, _cursor: Any, sql: str, _p: Any, context: Any, _m: Any) -> None:
        transaction = self._open.get(id(conn.connection.dbapi_connection))
        if transaction is None:
            return
        writing = _LOCKING.match(sql)
        if writing:
            verb, table = writing.group(1).upper(), writing.group(2).lower()
        elif sql.lstrip().upper().startswith("SELECT") and _LOCKING_READ.search(sql):
            found = _FROM.search(sql)
            verb, table = "SELECT", found.group(1).lower() if found else ""
        else:
            return
        if table not in CLASSES:
            return  # a temporary table of the dialect's node write-back, a savepoint
        rank = CLASSES[table]
        if table == "placements" and verb.startswith("INSERT"):
            rank = NEW_PLACEMENT
        where, values = _where_of(context, self.aliases)
        one_line = " ".join(sql.split())[:160]
        never_waits = bool(_NEVER_WAITS.search(sql))
        transaction.locks.append(Lock(rank, table, where, values, never_waits, one_line))

    def listen(self, engine: sa.Engine) -> None:
        """Start recording."""
        sa.event.listen(engine, "begin", self._begin)
        sa.event.listen(engine, "commit", self._end)
        sa.event.listen(engine, "rollback", self._end)
        sa.event.listen(engine, "before_cursor_execute", self._statement)

    def stop(self, engine: sa.Engine) -> None:
        """Stop recording."""
        sa.event.remove(engine, "begin", self._begin)
        sa.event.remove(engine, "commit", self._end)
        sa.event.remove(engine, "rollback", self._end)
        sa.event.remove(engine, "before_cursor_execute", self._statement)


@asynccontextmanager
async def statement_ledger(backend: Backend, clock: VirtualClock) -> AsyncIterator[SqlLedger]:
    """A ledger that sends every statement itself (no PostgreSQL admission function)."""
    options = backend.ledger_options()
    options.update(migrate=True, admission_function=False)
    ledger = plugins.make_ledger(plugins.plugin_manager(), backend.url, options, clock)
    assert isinstance(ledger, SqlLedger)
    await ledger.start()
    try:
        await empty(ledger)
        yield ledger
    finally:
        await ledger.close()


def held(
    placement: str, node: str, owner: str, clock: VirtualClock, seconds: int = 900
) -> ReservationRequest:
    """Room on ``node`` for ``placement``'s move off ``owner``, held ``seconds``."""
    reservation = Reservation(
        placement, node, Resources(1, 64, 1), owner, clock.now() + timedelta(seconds=seconds)
    )
    return ReservationRequest(reservation, DemandPolicy().target_load)


def audit(result: object) -> list[Event]:
    """One audit event for any change, so every transaction also inserts into ``events``."""
    return [Event("lock order recorded", START, "lock-order", "a")]


async def every_writing_transaction(ledger: SqlLedger, recorder: Recorder, clock: Any) -> None:
    """Each kind of writing transaction once, alone, labelled."""
    size = Resources(1, 64, 1)
    with recorder.during("node add"):
        for name in ("n1", "n2", "n3"):
            await ledger.add_node(NodeSpec(name, Capacity(64, 1 << 16, 1 << 10)), audit=audit)
    with recorder.during("node update"):
        await ledger.update_node(NodeSpec("n3", Capacity(32, 1 << 16, 1 << 10)), audit=audit)
    with recorder.during("node cordon"):
        await ledger.cordon("n3", audit=audit)
    with recorder.during("node uncordon"):
        await ledger.uncordon("n3", audit=audit)
    with recorder.during("admission, unclaimed"):
        kept = await ledger.admit(AdmitRequest("a", "n1", size), audit=audit)
        moved = await ledger.admit(AdmitRequest("a", "n2", size), audit=audit)
    with recorder.during("admission, refused"):
        await ledger.admit(AdmitRequest("a", "n1", Resources(10_000, 1, 1)), audit=audit)
    with recorder.during("admission batch"):
        await asyncio.gather(
            *(
                ledger.admit(AdmitRequest(ns, node, size), audit=audit)
                for ns in ("a", "b")
                for node in ("n2", "n1")
            )
        )
    with recorder.during("move"):
        assert moved.placement is not None
        await ledger.move(MoveRequest(moved.placement.id, "n1"), audit=audit)
    assert kept.placement is not None
    with recorder.during("reserve"):
        made = await ledger.reserve("n1", [held(kept.placement.id, "n3", "n1", clock)], audit=audit)
        assert made.made, made.refused
    with recorder.during("move into its reservation"):
        await ledger.move(MoveRequest(kept.placement.id, "n3"), audit=audit)
    with recorder.during("reserve"):
        made = await ledger.reserve("n3", [held(kept.placement.id, "n2", "n3", clock)])
        assert made.made, made.refused
    with recorder.during("reservations ended"):
        assert await ledger.end_reservations("n3") == 1
    with recorder.during("claim create"):
        created = await ledger.create_claim(
            ClaimRequest("a", Resources(32, 1 << 14, 100), 3600), audit=audit
        )
        assert created.claim is not None, created.refusal
    recorder.aliases[created.claim.id] = "a"
    with recorder.during("admission, claimed"):
        claimed = await ledger.admit(AdmitRequest("a", "n2", size), audit=audit)
    with recorder.during("admission, past an advisory claim's limit"):
        await ledger.admit(AdmitRequest("a", "n3", Resources(31, 1, 1)), audit=audit)
    with recorder.during("release, claimed"):
        assert claimed.placement is not None
        await ledger.release(claimed.placement.id, audit=audit)
    with recorder.during("claim update"):
        await ledger.update_claim(created.claim.id, ClaimUpdate(limit_cpus=40), audit=audit)
    with recorder.during("reconcile"):
        await ledger.reconcile(audit=audit)
    with recorder.during("claim delete"):
        await ledger.delete_claim(created.claim.id, audit=audit)
    with recorder.during("release, unclaimed"):
        assert kept.placement is not None
        await ledger.release(kept.placement.id, audit=audit)
    with recorder.during("claim create, then expiry"):
        short = await ledger.create_claim(ClaimRequest("b", Resources(8, 1024, 10), 60))
        assert short.claim is not None, short.refusal
    recorder.aliases[short.claim.id] = "b"
    clock.advance(timedelta(seconds=120))
    with recorder.during("claim expiry by update"):
        await ledger.update_claim(short.claim.id, ClaimUpdate(limit_cpus=9), audit=audit)
    with recorder.during("claim create, then expiry by reconcile"):
        other = await ledger.create_claim(ClaimRequest("c", Resources(8, 1024, 10), 60))
        assert other.claim is not None, other.refusal
    with recorder.during("reserve"):  # expires with the claim: the pass below ends it too
        made = await ledger.reserve("n3", [held(kept.placement.id, "n2", "n3", clock, 60)])
        assert made.made, made.refused
    recorder.aliases[other.claim.id] = "c"
    clock.advance(timedelta(seconds=120))
    with recorder.during("claim expiry by reconcile"):
        await ledger.reconcile(audit=audit)
    with recorder.during("token create"):
        token = await ledger.create_token("a", "d" * 64, START, audit=audit)
    with recorder.during("token revoke"):
        await ledger.revoke_token("a", token.id, START, audit=audit)
    with recorder.during("events group writer"):
        await asyncio.gather(*(ledger.record_events(audit(None)) for _ in range(4)))
    for p in await ledger.placements():
        with recorder.during("release, unclaimed"):
            await ledger.release(p.id)
    with recorder.during("node remove"):
        await ledger.remove_node("n3", audit=audit)


async def test_every_writing_transaction_takes_its_row_locks_in_the_documented_order(
    backend: Backend,
) -> None:
    if backend.kind == "sqlite":
        pytest.skip("SQLite has no row locks: one writer holds the whole database")
    clock = VirtualClock(START)
    recorder = Recorder()
    async with statement_ledger(backend, clock) as ledger:
        engine = ledger.store.engine.sync_engine
        recorder.listen(engine)
        try:
            await every_writing_transaction(ledger, recorder, clock)
        finally:
            recorder.stop(engine)
    seen = {t.label for t in recorder.done}
    report = "\n".join(f"{t.label}: {t.ranks()}" for t in recorder.done)
    # Every kind ran and locked something (a listener that saw nothing proves nothing).
    assert {"admission batch", "reconcile", "claim create", "release, claimed"} <= seen, report
    assert {"reserve", "move into its reservation", "reservations ended"} <= seen, report
    assert any(t.label == "admission batch" and len(t.ranks()) > 3 for t in recorder.done), report
    inversions = [f"{t.label}: {i}" for t in recorder.done for i in t.inversions()]
    assert inversions == [], "\n".join(inversions) + "\n\n" + report
    # Every transaction that changed something wrote its audit last (class 6).
    audited = [t for t in recorder.done if t.label != "admission, refused"]
    assert all(t.ranks()[-1] == CLASSES["events"] for t in audited if 6 in t.ranks()), report


def test_the_recorder_finds_an_inversion() -> None:
    """The check can fail: a batch whose second item took its claim after the first's node."""
    claim_a = Lock(2, "claims", "claims.active_namespace = :a", frozenset({"a"}), False, "A")
    old = Transaction(
        "admission batch",
        [
            claim_a,
            Lock(3, "cluster", "cluster.id = :id_1", frozenset({1}), False, "cluster"),
            Lock(4, "nodes", "nodes.name = :n", frozenset({"n1"}), False, "n1"),
            Lock(2, "claims", "claims.active_namespace = :a", frozenset({"b"}), False, "B"),
            Lock(4, "nodes", "nodes.name = :n", frozenset({"n1"}), False, "n1 again"),
        ],
    )
    assert old.inversions() == ["class 2 after 4: B"]
    assert old.ranks() == [2, 3, 4, 2, 4]
    # The claim of namespace a again (held), or b's taken without waiting: no inversion.
    again = Lock(2, "claims", "claims.active_namespace = :a", frozenset({"a"}), False, "A")
    nowait = Lock(2, "claims", "claims.active_namespace = :a", frozenset({"b"}), True, "B")
    assert Transaction("x", [*old.locks[:3], again]).inversions() == []
    assert Transaction("x", [*old.locks[:3], nowait]).inversions() == []
