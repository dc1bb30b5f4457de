"""Group commit on the database under test: batches form under concurrency and never for a lone
request, each admission of a batch keeps its own meaning (admitted, refused, replayed, unknown
node, run alone after a deadlock), nothing over-commits, and shutdown and cancellation lose or
double nothing.

Batches are made deterministic by queueing every admission before the writer wakes
(``asyncio.gather`` of admits started in one go); every test that relies on a batch asserts from
``group_commit_stats`` that one ran, so none can pass by silently taking the solo path.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine
from sqlalchemy.util import await_only

from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.sql.engine import CommitUnknown
from fleetgate.adapters.sql.group_commit import WRITER_TASK, GroupCommitConfig, GroupCommitStats
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.adapters.sql.postgres import batch_function
from fleetgate.domain.capacity.claims import ClaimRequest
from fleetgate.domain.capacity.dimensions import ALLOCATION, Capacity, Resources
from fleetgate.domain.capacity.errors import LedgerUnavailable, NodeNotFound
from fleetgate.domain.capacity.model import Admission, AdmitRequest, NodeSpec
from fleetgate.domain.events import Event, Level
from tests.adapters.sql.postgres.test_admit_function import recorded
from tests.adapters.sql.test_concurrency import (
    assert_counters_match_placements,
    burst_onto_room_for_five,
)
from tests.adapters.sql.test_faults import killed_at_first_commit, killer_of
from tests.backends import server_of
from tests.conftest import Backend
from tests.ledgers import START, open_ledger
from tests.strategies import BATCH_NODES, queued_admissions
from tests.waiting import HANG_SECONDS

BIG = Capacity(16, 65536, 1000)  # 48 vCPUs


#: The batch executors under test: PostgreSQL has its batch function besides the savepoints
#: every backend has (chosen by the server the session tests, as the ``backend`` fixture is).
EXECUTORS = (
    ("savepoints", "function")
    if os.environ.get("FLEETGATE_TEST_DATABASE_URL", "").startswith("postgresql")
    else ("savepoints",)
)


@pytest.fixture(params=EXECUTORS)
async def ledger(
    backend: Backend, clock: VirtualClock, request: pytest.FixtureRequest
) -> AsyncIterator[SqlLedger]:
    """The shared ledger fixture, once per batch executor.

    ``savepoints`` admits in-process on PostgreSQL too (like ``admission_function: false``), so
    every backend runs the savepoint executor; ``function`` is PostgreSQL's default, each batch
    one call of ``fleetgate_admit_batch``, held to the same tests.
    """
    async with open_ledger(backend, clock) as opened:
        if request.param == "savepoints":
            opened.one_call = False
        else:
            assert opened.batch_call, "fleetgate_admit_batch is installed at head"
        yield opened


@pytest.fixture
async def savepoint_ledger(backend: Backend, clock: VirtualClock) -> AsyncIterator[SqlLedger]:
    """A ledger on the savepoint executor on every backend (for tests of its statements)."""
    async with open_ledger(backend, clock) as opened:
        opened.one_call = False
        yield opened


def req(node: str, size: Resources = Resources(1, 1, 1), **kw: Any) -> AdmitRequest:
    return AdmitRequest("team", node, size, **kw)


def placed(admission: Admission) -> list[Event]:
    assert admission.placement is not None
    p = admission.placement
    return [Event("placed", START, p.id, p.namespace, Level.INFO, {"node": p.node})]


async def placed_events(ledger: SqlLedger) -> Counter[str]:
    """How many ``placed`` events each placement id has."""
    return Counter(r.event.subject for r in await ledger.events(kind="placed", limit=1000))


# --- batches form, and only under concurrency ------------------------------------------------


async def test_a_lone_sequential_request_never_goes_through_a_batch(ledger: SqlLedger) -> None:
    await ledger.add_node(NodeSpec("a", BIG))
    for _ in range(5):
        assert (await ledger.admit(req("a"), audit=placed)).admitted
    stats = ledger.group_commit_stats()
    assert stats.batches == 0 and stats.batched_admissions == 0
    assert stats.solo_admissions == 5
    assert len(await placed_events(ledger)) == 5


async def test_admissions_queued_together_commit_in_one_batch(ledger: SqlLedger) -> None:
    await ledger.add_node(NodeSpec("a", BIG))
    await ledger.add_node(NodeSpec("b", BIG))
    results = await asyncio.gather(
        *(ledger.admit(req("ab"[i % 2], Resources(1, 10, 1)), audit=placed) for i in range(6))
    )
    assert ledger.group_commit_stats() == GroupCommitStats(
        batches=1, batched_admissions=6, largest_batch=6, solo_admissions=0, split_batches=0
    )
    assert all(r.admitted and not r.replayed for r in results)
    ids = sorted(r.placement.id for r in results if r.placement is not None)
    assert sorted(p.id for p in await ledger.placements()) == ids
    # Every admitted item's event, once, in the batch's one INSERT.
    assert await placed_events(ledger) == Counter({i: 1 for i in ids})
    for name in "ab":
        node = await ledger.node(name)
        assert node is not None and node.used == Resources(3, 30, 3)
    await assert_counters_match_placements(ledger)


CALLER: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="nobody")


async def test_postgres_runs_a_batch_as_one_call_of_its_batch_function(
    ledger: SqlLedger, backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    if backend.kind != "postgres" or not ledger.one_call:
        pytest.skip("the batch function is PostgreSQL's default; here batches use savepoints")
    calls: list[int] = []
    real_call = batch_function.call

    async def counted(conn: Any, elements: Any) -> Any:
        calls.append(len(elements))
        return await real_call(conn, elements)

    monkeypatch.setattr(batch_function, "call", counted)
    await ledger.add_node(NodeSpec("a", BIG))
    results = await asyncio.gather(*(ledger.admit(req("a"), audit=placed) for _ in range(6)))
    assert all(r.admitted for r in results)
    assert calls == [6]  # the whole batch, one round trip
    assert len(await placed_events(ledger)) == 6
    await assert_counters_match_placements(ledger)


async def test_each_audit_is_built_in_its_callers_context(ledger: SqlLedger) -> None:
    """The writer builds every item's events, but as its caller would (a request's id lives in
    a context variable): no item's events carry another caller's, or none."""
    await ledger.add_node(NodeSpec("a", BIG))

    def audit(admission: Admission) -> list[Event]:
        assert admission.placement is not None
        return [Event("placed", START, admission.placement.id, "team", Level.INFO,
                      {"caller": CALLER.get()})]  # fmt: skip

    async def caller(name: str) -> tuple[str, Admission]:
        CALLER.set(name)
        return name, await ledger.admit(req("a"), audit=audit)

    # A lone one (run by the writer as a batch of one), then a batch of four.
    answers = [await caller("lone")]
    answers += await asyncio.gather(*(caller(f"c{i}") for i in range(4)))
    stats = ledger.group_commit_stats()
    assert stats.batches == 1 and stats.largest_batch == 4 and stats.solo_admissions == 1
    recorded = {r.event.subject: r.event.data["caller"] for r in await ledger.events()}
    assert recorded == {a.placement.id: name for name, a in answers if a.placement is not None}
    assert len(recorded) == 5


async def test_max_batch_bounds_a_batch(backend: Backend, clock: VirtualClock) -> None:
    async with open_ledger(backend, clock) as ledger:
        ledger = await _with_group_commit(ledger, max_batch=4)
        await ledger.add_node(NodeSpec("a", BIG))
        results = await asyncio.gather(*(ledger.admit(req("a")) for _ in range(10)))
        assert all(r.admitted for r in results)
        stats = ledger.group_commit_stats()
        # 10 queued before the writer woke: batches of 4, 4 and the last 2.
        assert stats == GroupCommitStats(
            batches=3, batched_admissions=10, largest_batch=4, solo_admissions=0, split_batches=0
        )
        await assert_counters_match_placements(ledger)


async def test_max_wait_gathers_admissions_that_arrive_a_moment_apart(
    backend: Backend, clock: VirtualClock
) -> None:
    async with open_ledger(backend, clock) as ledger:
        ledger = await _with_group_commit(ledger, max_batch=8, max_wait_ms=600)
        await ledger.add_node(NodeSpec("a", BIG))

        async def later(delay: float) -> Admission:
            await asyncio.sleep(delay)
            return await ledger.admit(req("a"))

        results = await asyncio.gather(*(later(0.05 * i) for i in range(3)))
        assert all(r.admitted for r in results)
        assert ledger.group_commit_stats().largest_batch == 3


async def test_max_batch_one_turns_group_commit_off(backend: Backend, clock: VirtualClock) -> None:
    async with open_ledger(backend, clock) as ledger:
        ledger = await _with_group_commit(ledger, max_batch=1)
        await ledger.add_node(NodeSpec("a", BIG))
        assert all(
            r.admitted for r in await asyncio.gather(*(ledger.admit(req("a")) for _ in range(4)))
        )
        assert ledger.group_commit_stats() == GroupCommitStats()


async def _with_group_commit(ledger: SqlLedger, **config: Any) -> SqlLedger:
    """A second ledger on the same database with these group-commit options (the first closed)."""
    options = dict(ledger.options, group_commit=config, migrate=False)
    await ledger.close()
    again = SqlLedger(ledger.url, options, ledger.store.dialect, ledger.store.clock)
    await again.start()
    again.one_call = False
    _opened.append(again)
    return again


_opened: list[SqlLedger] = []


@pytest.fixture(autouse=True)
async def _close_reopened() -> AsyncIterator[None]:
    yield
    while _opened:
        await _opened.pop().close()


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"max_batch": 0}, "group_commit.max_batch"),
        ({"max_batch": "8"}, "group_commit.max_batch"),
        ({"max_batch": True}, "group_commit.max_batch"),
        ({"max_wait_ms": -1}, "group_commit.max_wait_ms"),
        ({"max_wait_ms": float("nan")}, "group_commit.max_wait_ms"),
        ({"max_batches": 3}, "max_batches"),
    ],
)
def test_bad_group_commit_options_name_the_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        GroupCommitConfig.from_options({"group_commit": raw})


def test_stats_taken_apart_count_only_what_happened_between() -> None:
    before = GroupCommitStats(4, 10, 3, 2, 0)
    after = GroupCommitStats(24, 110, 7, 5, 1)
    between = after.since(before)
    assert between == GroupCommitStats(20, 100, 7, 3, 1)  # the largest stays the running one
    assert between.mean_batch == 5.0
    assert GroupCommitStats().mean_batch == 0.0  # nothing batched: 0, not a division error


def test_group_commit_is_on_by_default_and_adds_no_wait() -> None:
    config = GroupCommitConfig.from_options({})
    assert config.enabled and config.max_batch > 1 and config.max_wait_ms == 0


# --- each admission of a batch keeps its own meaning -----------------------------------------


async def test_refused_duplicate_and_unknown_node_items_leave_the_others_committed(
    ledger: SqlLedger,
) -> None:
    await ledger.add_node(NodeSpec("a", BIG))
    await ledger.add_node(NodeSpec("small", Capacity(1, 1024, 10)))  # 3 vCPUs
    earlier = await ledger.admit(req("a", request_id="earlier"), audit=placed)
    assert earlier.placement is not None
    batch = [
        req("a", Resources(2, 2, 2)),  # admitted
        req("small", Resources(4, 1, 1)),  # refused: 4 > 3 vCPUs
        req("a", Resources(5, 5, 5), request_id="earlier"),  # a repeat: replays, charges nothing
        req("nowhere"),  # unknown node
        req("a", Resources(3, 3, 3), request_id="twin"),  # admitted ...
        req("a", Resources(3, 3, 3), request_id="twin"),  # ... and its twin in the same batch
        req("small", Resources(3, 1, 1)),  # admitted: the refusal above changed nothing here
    ]
    results = await asyncio.gather(
        *(ledger.admit(r, audit=placed) for r in batch), return_exceptions=True
    )
    stats = ledger.group_commit_stats()
    assert stats.batches == 1 and stats.largest_batch == len(batch) and stats.split_batches == 0
    first, refused, repeat, missing, twin, twin_again, last = results
    assert isinstance(first, Admission) and first.admitted and not first.replayed
    assert isinstance(refused, Admission) and not refused.admitted
    assert refused.denial is not None and refused.denial.exceeded == {"cpus"}
    assert (
        isinstance(repeat, Admission) and repeat.replayed and repeat.placement == earlier.placement
    )
    assert isinstance(missing, NodeNotFound)
    assert isinstance(twin, Admission) and twin.admitted and not twin.replayed
    assert isinstance(twin_again, Admission) and twin_again.replayed
    assert twin_again.placement == twin.placement
    assert isinstance(last, Admission) and last.admitted
    admitted = [earlier, first, twin, last]
    ids = sorted(a.placement.id for a in admitted if a.placement is not None)
    assert sorted(p.id for p in await ledger.placements()) == ids
    assert await placed_events(ledger) == Counter({i: 1 for i in ids})
    a, small = await ledger.node("a"), await ledger.node("small")
    assert a is not None and a.used == Resources(6, 6, 6)
    assert small is not None and small.used == Resources(3, 1, 1)
    await assert_counters_match_placements(ledger)


async def test_an_advisory_claim_charged_past_its_limit_inside_a_batch(ledger: SqlLedger) -> None:
    await ledger.add_node(NodeSpec("a", BIG))
    made = await ledger.create_claim(ClaimRequest("team", Resources(2, 2, 2), 3600))
    assert made.claim is not None
    results = await asyncio.gather(*(ledger.admit(req("a"), audit=placed) for _ in range(3)))
    assert ledger.group_commit_stats().largest_batch == 3
    assert all(r.admitted and r.claim_id == made.claim.id for r in results)
    # Advisory: the third goes over the claim and says so; its overage is the cluster's.
    assert [bool(r.claim_over_limit) for r in results] == [False, False, True]
    claim = await ledger.claim(made.claim.id)
    assert claim is not None and claim.used == Resources(3, 3, 3)
    assert (await ledger.cluster()).unclaimed_used == Resources(1, 1, 1)
    assert (await ledger.reconcile()).summary.clean


async def test_a_repeat_across_batches_replays(ledger: SqlLedger) -> None:
    await ledger.add_node(NodeSpec("a", BIG))
    one = await asyncio.gather(*(ledger.admit(req("a", request_id=f"r{i}")) for i in range(3)))
    two = await asyncio.gather(*(ledger.admit(req("a", request_id=f"r{i}")) for i in range(3)))
    assert ledger.group_commit_stats().batches == 2
    assert all(not r.replayed for r in one) and all(r.replayed for r in two)
    assert [r.placement for r in one] == [r.placement for r in two]
    assert len(await ledger.placements()) == 3
    await assert_counters_match_placements(ledger)


async def test_fifty_way_burst_onto_capacity_for_five_admits_five(ledger: SqlLedger) -> None:
    results = await burst_onto_room_for_five(ledger)
    placed_on = sorted(r.placement.node for r in results if r.placement is not None)
    assert placed_on == ["cpu-bound"] * 3 + ["mem-bound"] * 2
    stats = ledger.group_commit_stats()
    assert stats.batches >= 1 and stats.largest_batch >= 2
    await assert_counters_match_placements(ledger)


# --- no over-commit inside a batch: batches against a sequential model ------------------------

CLAIM_LIMIT = Resources(5, 6, 6)
NODE_CAPACITY = Capacity(2, 6, 6)  # limits 6 vCPUs / 6 MB / 6 GB


def _fits(used: Resources, size: Resources, limit: Resources) -> bool:
    return all(used.get(d) + size.get(d) <= limit.get(d) for d in ALLOCATION)


def sequential_model(
    items: Sequence[tuple[str, str, Resources, str | None]],
    cluster_room: Resources,
    node_limit: Resources,
) -> list[str]:
    """What admitting ``items`` one after the other answers: admitted, replayed or refused.

    The claimed namespace is held to its (hard) claim, the other to the cluster's unclaimed
    room; every node to its limits. Written out here, independently of the domain's guards.
    """
    used = {name: Resources() for name in BATCH_NODES}
    claim, unclaimed = Resources(), Resources()
    taken: set[tuple[str, str]] = set()
    answers = []
    for namespace, node, size, request_id in items:
        if request_id is not None and (namespace, request_id) in taken:
            answers.append("replayed")
            continue
        side_ok = (
            _fits(claim, size, CLAIM_LIMIT)
            if namespace == "claimed"
            else _fits(unclaimed, size, cluster_room)
        )
        if not (side_ok and _fits(used[node], size, node_limit)):
            answers.append("refused")
            continue
        used[node] = used[node].plus(size)
        if namespace == "claimed":
            claim = claim.plus(size)
        else:
            unclaimed = unclaimed.plus(size)
        if request_id is not None:
            taken.add((namespace, request_id))
        answers.append("admitted")
    # A refused item is answered after its batch commits: a twin later in the batch that was
    # admitted makes it a replay, as two racing identical requests are on the one-admission path.
    return [
        "replayed" if a == "refused" and rid is not None and (ns, rid) in taken else a
        for a, (ns, _, _, rid) in zip(answers, items, strict=True)
    ]


def answer(result: Admission) -> str:
    return "replayed" if result.replayed else "admitted" if result.admitted else "refused"


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=queued_admissions())
async def test_a_batch_answers_as_admitting_its_items_one_by_one(
    backend: Backend, items: list[tuple[str, str, Resources, str | None]]
) -> None:
    async with open_ledger(backend, enforcement="hard") as ledger:
        ledger.one_call = False
        for name in BATCH_NODES:
            await ledger.add_node(NodeSpec(name, NODE_CAPACITY))
        outcome = await ledger.create_claim(ClaimRequest("claimed", CLAIM_LIMIT, 3600))
        assert outcome.claim is not None
        cluster = await ledger.cluster()
        room = cluster.total.minus_floored(cluster.claimed)
        node = await ledger.node("n1")
        assert node is not None
        expected = sequential_model(items, room, node.limits)
        results = await asyncio.gather(
            *(ledger.admit(AdmitRequest(ns, n, size, request_id=rid)) for ns, n, size, rid in items)
        )
        stats = ledger.group_commit_stats()
        assert stats.batches == 1 and stats.largest_batch == len(items), stats
        assert stats.solo_admissions == 0
        assert [answer(r) for r in results] == expected
        after = await ledger.cluster()
        claim = await ledger.claim(outcome.claim.id)
        assert claim is not None
        assert all(claim.used.get(d) <= claim.limit.get(d) for d in ALLOCATION)
        assert all(
            after.unclaimed_used.get(d) <= after.total.get(d) - after.claimed.get(d)
            for d in ALLOCATION
        )
        assert len(await ledger.placements()) == expected.count("admitted")
        assert (await ledger.reconcile()).summary.clean


# --- shutdown and cancellation -----------------------------------------------------------------


async def test_close_finishes_the_queued_admissions(backend: Backend, clock: VirtualClock) -> None:
    async with open_ledger(backend, clock) as ledger:
        ledger.one_call = False
        await ledger.add_node(NodeSpec("a", BIG))
        admitting = [asyncio.ensure_future(ledger.admit(req("a"))) for _ in range(5)]
        await asyncio.sleep(0)  # queued; the writer is starting
        await ledger.close()
        assert all(f.done() for f in admitting)
        assert all(f.result().admitted for f in admitting)
        assert ledger.group_commit_stats().batches >= 1
        # No writer is left behind to be destroyed pending when the loop ends.
        assert not [t for t in asyncio.all_tasks() if t.get_name() == WRITER_TASK]
        # The store reconnects on use: the five committed before close returned.
        assert len(await ledger.placements()) == 5


async def test_the_writer_ends_when_nothing_is_queued(ledger: SqlLedger) -> None:
    await ledger.add_node(NodeSpec("a", BIG))
    assert all(
        r.admitted for r in await asyncio.gather(*(ledger.admit(req("a")) for _ in range(3)))
    )
    assert ledger.group_commit_stats().batches == 1
    await asyncio.sleep(0)  # the writer's last step, after it answered the batch
    assert not [t for t in asyncio.all_tasks() if t.get_name() == WRITER_TASK]


def first_batch_statement(ledger: SqlLedger) -> str:
    """How the batch's first statement begins: its first guarded UPDATE, or the one call."""
    return "SELECT FG_INDEX" if ledger.one_call and ledger.batch_call else "UPDATE"


def hold_first(ledger: SqlLedger, prefix: str, gate: asyncio.Event, reached: asyncio.Event) -> Any:
    """Make the first statement ``prefix…`` wait for ``gate``, setting ``reached`` there."""
    armed = [True]

    def hook(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if armed[0] and statement.lstrip().upper().startswith(prefix):
            armed[0] = False
            reached.set()
            await_only(gate.wait())

    sa.event.listen(ledger.store.engine.sync_engine, "before_cursor_execute", hook)
    return hook


async def test_a_caller_cancelled_inside_its_batch_gets_its_placement_once(
    ledger: SqlLedger,
) -> None:
    await ledger.add_node(NodeSpec("a", BIG))
    gate, reached = asyncio.Event(), asyncio.Event()
    hook = hold_first(ledger, first_batch_statement(ledger), gate, reached)
    try:
        tasks = [
            asyncio.ensure_future(ledger.admit(req("a", request_id=f"c{i}"))) for i in range(4)
        ]
        await reached.wait()  # the writer has taken all four and waits at the gate
        assert ledger.group_commit_stats().batches == 1
        tasks[1].cancel()
        gate.set()
        done = await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        sa.event.remove(ledger.store.engine.sync_engine, "before_cursor_execute", hook)
    assert isinstance(done[1], asyncio.CancelledError)
    assert ledger.group_commit_stats().largest_batch == 4
    # The batch committed regardless; the caller just stopped waiting. Asking again replays.
    assert [p.request_id for p in await ledger.placements()].count("c1") == 1
    retry = await ledger.admit(req("a", request_id="c1"))
    assert retry.replayed
    assert [p.request_id for p in await ledger.placements()].count("c1") == 1
    await assert_counters_match_placements(ledger)


async def test_a_caller_cancelled_before_its_batch_runs_is_never_admitted(
    ledger: SqlLedger,
) -> None:
    await ledger.add_node(NodeSpec("a", BIG))
    gate, reached = asyncio.Event(), asyncio.Event()
    hook = hold_first(ledger, first_batch_statement(ledger), gate, reached)
    try:
        first = [asyncio.ensure_future(ledger.admit(req("a"))) for _ in range(2)]
        await reached.wait()  # the writer holds the first batch at the gate
        assert ledger.group_commit_stats().batches == 1
        queued = [
            asyncio.ensure_future(ledger.admit(req("a", request_id=f"q{i}"))) for i in range(3)
        ]
        await asyncio.sleep(0.01)  # queued behind it
        queued[0].cancel()
        gate.set()
        assert all(r.admitted for r in await asyncio.gather(*first))
        results = await asyncio.gather(*queued, return_exceptions=True)
    finally:
        sa.event.remove(ledger.store.engine.sync_engine, "before_cursor_execute", hook)
    assert isinstance(results[0], asyncio.CancelledError)
    assert all(isinstance(r, Admission) and r.admitted for r in results[1:])
    assert ledger.group_commit_stats().batches == 2  # q1 and q2 in the second; q0 dropped
    assert "q0" not in {p.request_id for p in await ledger.placements()}
    await assert_counters_match_placements(ledger)


# --- a connection killed around each statement of a batch ---------------------------------

BATCH_STATEMENTS = [
    "SAVEPOINT",
    "UPDATE CLAIMS",
    "UPDATE CLUSTER",
    "SELECT",
    "UPDATE NODES",
    "INSERT INTO PLACEMENTS",
    "ROLLBACK TO SAVEPOINT",  # the refused item's
]


def at_nth(ledger: SqlLedger, prefix: str, nth: int, when: str, action: Any) -> Any:
    """Run ``action(conn, cursor)`` once, before or after the ``nth`` statement ``prefix…``."""
    seen = [0]

    def hook(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith(prefix):
            seen[0] += 1
            if seen[0] == nth:
                action(conn, cursor)

    sa.event.listen(ledger.store.engine.sync_engine, f"{when}_cursor_execute", hook)
    return hook


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize(
    ("prefix", "nth"),
    # The first occurrence and the last item's (the refused item inserts no placement).
    [(s, n) for s in BATCH_STATEMENTS[:-2] for n in (1, 4)]
    + [("INSERT INTO PLACEMENTS", 1), ("INSERT INTO PLACEMENTS", 3)]
    + [("ROLLBACK TO SAVEPOINT", 1), ("INSERT INTO EVENTS", 1)],
)
async def test_a_connection_killed_in_a_batch_loses_and_doubles_nothing(
    savepoint_ledger: SqlLedger, backend: Backend, prefix: str, nth: int, when: str
) -> None:
    ledger = savepoint_ledger  # the function's call is killed in test_batch_function
    await ledger.add_node(NodeSpec("a", BIG))
    await ledger.add_node(NodeSpec("small", Capacity(1, 1024, 10)))  # 3 vCPUs
    await ledger.admit(req("a"), audit=placed)
    before = (await ledger.nodes(), await ledger.cluster(), await ledger.placements())
    killer, kill = killer_of(backend)

    cuts: list[str] = []

    def cut(conn: Any, cursor: Any) -> None:
        cuts.append(prefix)
        if killer is None:
            # SQLite: close the statement too, or sqlite3 keeps the closed connection alive
            # as a zombie holding the write lock until its last statement is finalised.
            cursor.close()
        kill(conn, cursor)

    hook = at_nth(ledger, prefix, nth, when, cut)
    # An item the node refuses first (its savepoint rolled back), then three that fit.
    batch = [req("small", Resources(4, 1, 1))] + [req("a", Resources(2, 2, 2))] * 3
    try:
        results = await asyncio.gather(
            *(ledger.admit(r, audit=placed) for r in batch), return_exceptions=True
        )
    finally:
        sa.event.remove(ledger.store.engine.sync_engine, f"{when}_cursor_execute", hook)
        if killer is not None:
            await killer.dispose()
    assert cuts == [prefix], "the batch never sent the statement"
    stats = ledger.group_commit_stats()
    assert stats.batches == 1 and stats.largest_batch == 4, stats
    refused, results = results[0], results[1:]
    assert isinstance(refused, LedgerUnavailable) or (
        isinstance(refused, Admission) and refused.denial is not None
    ), refused
    admitted = [r for r in results if isinstance(r, Admission)]
    failed = [r for r in results if not isinstance(r, Admission)]
    assert all(isinstance(e, LedgerUnavailable) for e in failed), failed
    if any(isinstance(e, CommitUnknown) for e in failed):
        # Only a kill after the batch's last statement can show first at its COMMIT: every item
        # is told the outcome is unknown; here the COMMIT never reached the server.
        assert prefix == "INSERT INTO EVENTS" and when == "after"
        assert len(failed) == 3
        assert (await ledger.nodes(), await ledger.cluster(), await ledger.placements()) == before
        return
    # Killed before the COMMIT: the batch was split and each item admitted alone, once.
    assert stats.split_batches == 1
    assert all(r.admitted for r in admitted)
    ids = sorted([p.id for p in before[2]] + [r.placement.id for r in admitted if r.placement])
    assert sorted(p.id for p in await ledger.placements()) == ids
    assert await placed_events(ledger) == Counter({i: 1 for i in ids})
    await assert_counters_match_placements(ledger)
    assert (await ledger.reconcile()).summary.clean
    # SQLite: a split item may itself have met the closed connection; nothing of it remains.
    assert backend.kind == "sqlite" or len(admitted) == 3


async def test_a_connection_killed_at_the_batch_commit_leaves_every_outcome_unknown(
    savepoint_ledger: SqlLedger, backend: Backend
) -> None:
    if backend.kind == "sqlite":
        pytest.skip("SQLite has no server side to kill")
    ledger = savepoint_ledger  # the function's call is killed in test_batch_function
    await ledger.add_node(NodeSpec("a", BIG))
    async with killed_at_first_commit(ledger, backend) as victims:
        results = await asyncio.gather(
            *(ledger.admit(req("a"), audit=placed) for _ in range(3)), return_exceptions=True
        )
    assert victims and ledger.group_commit_stats().batches == 1
    assert all(isinstance(r, CommitUnknown) and "during commit" in str(r) for r in results), results
    assert ledger.group_commit_stats().split_batches == 0  # never run again: it may have committed
    assert await ledger.placements() == [] and len(await placed_events(ledger)) == 0
    assert (await ledger.admit(req("a"))).admitted


# --- helpers for outside sessions ------------------------------------------------------------


async def _lock_waits(conn: AsyncConnection, kind: str) -> int:
    value = (await conn.execute(sa.text(server_of(kind).lock_waits))).scalar_one()
    await conn.commit()
    return int(value)


async def wait_for_lock_wait(url: str, kind: str, seconds: float = 30.0) -> None:
    """Return once some session waits for a row lock (bounded).

    MariaDB refreshes ``innodb_trx`` only when it was last read over 0.1 s ago: polling faster
    would read the same stale cache for ever.
    """
    pause = 0.15 if kind == "mariadb" else 0.02
    watcher = create_async_engine(url)
    try:
        async with watcher.connect() as conn:
            for _ in range(int(seconds / pause)):
                if await _lock_waits(conn, kind):
                    return
                await asyncio.sleep(pause)
        raise AssertionError("no session ever waited for a lock")
    finally:
        await watcher.dispose()


# --- a batch never waits long for a lock ------------------------------------------------------


async def test_an_item_whose_row_another_transaction_holds_does_not_hold_up_its_batch(
    ledger: SqlLedger, backend: Backend
) -> None:
    # A batch holds earlier items' rows while it waits for a later item's: out of the canonical
    # order, so a wait may be a cycle that PostgreSQL would find only after deadlock_timeout.
    # Its waits are bounded instead: the item gives up, the batch commits, the item runs alone.
    if backend.kind != "postgres":
        pytest.skip("PostgreSQL alone needs it (InnoDB sees cycles at once; SQLite: one writer)")
    await ledger.add_node(NodeSpec("a", BIG))
    await ledger.add_node(NodeSpec("held", BIG))
    outside = create_async_engine(backend.url)
    try:
        async with outside.connect() as other:
            await other.execute(
                sa.text("UPDATE nodes SET updated_at = updated_at WHERE name = 'held'")
            )
            tasks = [
                asyncio.ensure_future(ledger.admit(req(node), audit=placed))
                for node in ("a", "held", "a")
            ]
            # The two items on "a" are answered while the row of "held" is still locked: the
            # batch did not wait for the outside transaction (it would wait for as long as
            # that stays open).
            done = await asyncio.wait_for(asyncio.gather(tasks[0], tasks[2]), timeout=HANG_SECONDS)
            assert all(r.admitted for r in done)
            assert not tasks[1].done()
            stats = ledger.group_commit_stats()
            assert stats.batches == 1 and stats.batched_admissions == 3
            await other.rollback()
        # Admitted alone, after the wait.
        alone = await asyncio.wait_for(tasks[1], timeout=HANG_SECONDS)
    finally:
        await outside.dispose()
    assert alone.admitted and alone.placement is not None and alone.placement.node == "held"
    assert ledger.group_commit_stats().solo_admissions == 1
    assert len(await placed_events(ledger)) == 3
    await assert_counters_match_placements(ledger)


# --- what a batch sends besides its admissions ------------------------------------------------

#: More than a node of ``Capacity(1, 1024, 10)`` allows (3 vCPUs, 1024 MB, 10 GB) everywhere.
TOO_BIG = Resources(4, 2048, 20)


async def test_a_batch_reads_only_for_refusals_its_executor_did_not_look_up(
    ledger: SqlLedger, backend: Backend
) -> None:
    # A refused retry whose first attempt was admitted is answered with that placement; a
    # refused new request with its refusal. PostgreSQL's batch function looked for both request
    # ids itself before refusing: only the repeat's placement is read after the COMMIT. The
    # savepoint executor looks for neither, so each refusal is followed by a read.
    await ledger.add_node(NodeSpec("a", BIG))
    await ledger.add_node(NodeSpec("full", Capacity(1, 1024, 10)))
    first = await ledger.admit(req("a", TOO_BIG, request_id="r1"))
    assert first.admitted
    before = ledger.group_commit_stats()
    with recorded(ledger) as statements:
        repeat, refused, fresh = await asyncio.gather(
            ledger.admit(req("full", TOO_BIG, request_id="r1")),
            ledger.admit(req("full", TOO_BIG, request_id="new")),
            ledger.admit(req("a", request_id="fresh")),
        )
    assert ledger.group_commit_stats().since(before).batches == 1
    assert repeat.replayed and repeat.placement == first.placement
    assert refused.denial is not None and not refused.replayed
    assert fresh.admitted
    reads = [s for s in statements if s.startswith("SELECT") and "FROM PLACEMENTS" in s]
    bounds = [s for s in statements if s.startswith("SET LOCAL")]
    if ledger.one_call and ledger.batch_call:
        # The batch's rows locked in order (``lock_in_order``: claims, cluster, nodes), one
        # call (which bounds its own lock waits: no SET LOCAL), then the repeat's read.
        locks = 3
        assert statements[locks].startswith("SELECT FG_INDEX") and len(reads) == 1, statements
        assert len(statements) == locks + 2 and bounds == [], statements
    else:
        assert len(reads) == 2, statements
        expected = [f"SET LOCAL LOCK_TIMEOUT = '{batch_function.BATCH_LOCK_TIMEOUT_MS}MS'"]
        assert bounds == (expected if backend.kind == "postgres" else []), statements
    assert [p.request_id for p in await ledger.placements()].count("r1") == 1
