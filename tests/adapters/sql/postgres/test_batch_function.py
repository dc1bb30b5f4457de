"""A batch of admissions as one PostgreSQL call: every outcome, faults, and the one-by-one path.

The executor runs inside a real transaction on the database under test; after the COMMIT the
counters are checked against the placements and the non-admitted items must have left nothing.
The function is PostgreSQL's only: elsewhere these tests skip (the generated-text tests and the
migration test run on every backend).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
from collections.abc import AsyncIterator
from importlib import import_module
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from hypothesis import HealthCheck, event, given, settings
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.util import await_only

from fleetgate.adapters.sql import admission
from fleetgate.adapters.sql.batch_items import BatchItem, ItemResult, Outcome
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.adapters.sql.migrate import alembic_config, current_revision
from fleetgate.adapters.sql.postgres import admit_function, batch_function, stored_functions
from fleetgate.adapters.sql.postgres.batch_function import postgres_batch_executor
from fleetgate.domain.capacity.claims import Claim, ClaimEnforcement, ClaimRequest, enforcement_of
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.errors import LedgerError, NodeNotFound
from fleetgate.domain.capacity.model import Admission, AdmitRequest, NodeMetrics, NodeSpec
from fleetgate.domain.events import Event, Level
from tests.adapters.sql.seed import claim_used, insert_claim
from tests.adapters.sql.test_faults import after_first, kill_session
from tests.conftest import Backend
from tests.invariants import check_ledger
from tests.ledgers import START, empty
from tests.strategies import admission_batches
from tests.waiting import HANG_SECONDS

HOUR = 3600
SIZE = Resources(1, 1, 1)
#: The batch function's bound on one lock wait, as its definition sets it.
BOUND = f"SET lock_timeout = '{batch_function.BATCH_LOCK_TIMEOUT_MS}ms'"


def postgres_only(backend: Backend) -> None:
    if backend.kind != "postgres":
        pytest.skip("fleetgate_admit_batch is PostgreSQL-only; the other backends batch in-process")


def audit_of(admission: Admission) -> list[Event]:
    assert admission.placement is not None
    return [Event("placed", START, admission.placement.id, admission.placement.namespace,
                  Level.INFO, {})]  # fmt: skip


def item(namespace: str, node: str, size: Resources = SIZE, **kw: Any) -> BatchItem:
    request = AdmitRequest(namespace, node, size, **kw)
    return BatchItem(request, f"p-{namespace}-{size.cpus}-{kw.get('request_id')}", audit_of)


async def state(ledger: SqlLedger) -> tuple[Any, ...]:
    return (
        await ledger.nodes(),
        await ledger.cluster(),
        await ledger.placements(),
        await ledger.claims(),
        await ledger.events(),
    )


# --- the generated text ------------------------------------------------------------------------


def test_the_batch_runs_the_generated_admission_on_each_element() -> None:
    text = batch_function.definition()
    # the same arguments as fleetgate_admit, as arrays, handed on element by element in order
    arrays = tuple((n, f"{t}[]") for n, t in admit_function.ARGUMENTS)
    assert arrays == batch_function.ARGUMENTS
    element = ", ".join(f"{n}[i]" for n, _ in admit_function.ARGUMENTS)
    assert f"FROM {admit_function.NAME}({element});" in text
    # no guard of its own: every guarded statement is fleetgate_admit's generated one
    for statement in ("UPDATE ", "INSERT ", "SELECT claims", "WHERE "):
        assert statement not in text
    # each element is a subtransaction that undoes itself unless admitted
    assert text.count("BEGIN") == 2 and "EXCEPTION" in text
    assert f"IF fg_outcome <> '{admit_function.ADMITTED}' THEN" in text
    for condition in ("unique_violation", *batch_function.RETRIED):
        assert f"WHEN {condition} THEN" in text
    assert "'uq_placements_namespace_request_id'" in text  # only a repeated request id


def test_the_digest_covers_the_admission_function_it_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    statements = batch_function.install_statements()
    assert statements[0] == batch_function.definition()
    assert batch_function.digest() in statements[1] and len(batch_function.digest()) == 32
    before = batch_function.digest()
    monkeypatch.setattr(admit_function, "digest", lambda: "0" * 32)
    assert batch_function.digest() != before  # a changed guard makes the batch stale too


# --- arguments ------------------------------------------------------------------------------


def test_each_element_carries_the_domains_decisions() -> None:
    # The one call and every batch element are given their arguments by the same
    # ``admit_function.arguments_for``; here its decisions, as values: the claim rule is hard
    # only under hard enforcement, and a target load of 0 waives the demand clause.
    cases = [
        (AdmitRequest("team", "a", Resources(1, 2, 3), demand=0.6, target_load=0.75), True),
        (AdmitRequest("team", "a", Resources(0, 1, 1), target_load=0), False),
    ]
    for request, demand_clause in cases:
        for enforcement, hard in (
            (ClaimEnforcement.HARD, True),
            (ClaimEnforcement.ADVISORY, False),
        ):
            sent = admit_function.arguments_for(request, "p-1", 12.5, enforcement)
            assert sent["p_hard"] is hard
            assert sent["p_demand_clause"] is demand_clause
            assert (sent["p_cpus"], sent["p_memory_mb"], sent["p_disk_gb"]) == (
                request.resources.cpus,
                request.resources.memory_mb,
                request.resources.disk_gb,
            )
            assert (sent["p_id"], sent["p_now"], sent["p_request_id"]) == ("p-1", 12.5, None)
            assert set(sent) == {name for name, _ in admit_function.ARGUMENTS}


# --- every outcome in one batch ------------------------------------------------------------


async def blocked_by(engine: AsyncEngine, victim: int, blocker: int) -> None:
    """Wait (bounded) until the session ``victim`` waits for a lock ``blocker`` holds."""
    async with engine.connect() as watcher:
        for _ in range(600):
            found = await watcher.execute(
                sa.text("SELECT CAST(:b AS integer) = ANY(pg_blocking_pids(:v))"),
                {"b": blocker, "v": victim},
            )
            await watcher.rollback()
            if found.scalar():
                return
            await asyncio.sleep(0.05)
    raise AssertionError(f"session {victim} never waited for {blocker}")


async def pid_of(conn: AsyncConnection) -> int:
    return int((await conn.execute(sa.text("SELECT pg_backend_pid()"))).scalar_one())


@pytest.fixture
async def outside(backend: Backend) -> AsyncIterator[AsyncEngine]:
    """An engine of its own: the sessions that hold locks against the batch."""
    engine = create_async_engine(backend.url)
    try:
        yield engine
    finally:
        await engine.dispose()


async def test_a_batch_with_every_outcome_commits_exactly_its_admitted_items(
    ledger: SqlLedger, backend: Backend, outside: AsyncEngine
) -> None:
    postgres_only(backend)
    await ledger.add_node(NodeSpec("a", Capacity(64, 65536, 1000)))
    await ledger.add_node(NodeSpec("b", Capacity(64, 65536, 1000)))
    await ledger.add_node(NodeSpec("c", Capacity(2, 2048, 20)))
    reserved = await ledger.create_claim(ClaimRequest("reserved", Resources(300, 1000, 10), HOUR))
    capped = await ledger.create_claim(ClaimRequest("capped", Resources(4, 4096, 40), HOUR))
    assert reserved.claim is not None and capped.claim is not None
    assert (await ledger.admit(AdmitRequest("team", "a", SIZE, request_id="old"))).admitted
    items = [
        item("capped", "a"),  # 0 admitted, charged to its claim (the cluster row untouched)
        item("late", "a"),  # 1 waits for the cluster row; a claim appears, held: SOLO
        item("team", "a", request_id="r1"),  # 2 admitted
        item("team", "a", Resources(2, 2, 2), request_id="r1"),  # 3 duplicate inside the batch
        item("team", "a", request_id="old"),  # 4 duplicate of a committed one
        item("team", "c", Resources(1, 1, 100)),  # 5 refused by the node (20 GB of disk)
        item("team", "nowhere"),  # 6 no such node
        item("capped", "a", Resources(10, 1, 1)),  # 7 refused by its (hard) claim
        item("team", "a", Resources(100, 1, 1)),  # 8 refused by the cluster (304 of 390 claimed)
        item("team", "b"),  # 9 deadlocked against an outside session: SOLO
        item("team", "a", Resources(3, 3, 3)),  # 10 admitted after all that
    ]
    items = [BatchItem(it.request, f"p{i}", it.audit) for i, it in enumerate(items)]
    before = await ledger.placements()
    async with (
        ledger.store.engine.connect() as conn,
        outside.connect() as cluster_holder,
        outside.connect() as claim_holder,
        outside.connect() as node_holder,
    ):
        ours, holding_b = await pid_of(conn), await pid_of(node_holder)
        # Our session is the one to find the deadlock (the outside one would after a minute).
        await conn.execute(sa.text("SET LOCAL deadlock_timeout = '1s'"))
        # The waits below last longer than the function's bound on a lock wait: lifted inside
        # this transaction alone (DDL is transactional), and put back before the COMMIT.
        await conn.execute(sa.text(f"ALTER FUNCTION {batch_function.SIGNATURE} RESET lock_timeout"))
        await node_holder.execute(sa.text("SET deadlock_timeout = '60s'"))
        await node_holder.execute(
            sa.text("UPDATE nodes SET updated_at = updated_at WHERE name = 'b'")
        )
        await cluster_holder.execute(sa.text("UPDATE cluster SET updated_at = updated_at"))
        batch = asyncio.ensure_future(
            postgres_batch_executor(conn, items, ledger.store.now_epoch(), ClaimEnforcement.HARD)
        )
        # Item 1 waits for the cluster row (item 0 holds node a by now). The session holding
        # node b starts waiting for node a, so item 9, asking for node b, closes a cycle that
        # only item 9 is rolled back for.
        await blocked_by(outside, ours, await pid_of(cluster_holder))
        crossing = asyncio.ensure_future(
            node_holder.execute(
                sa.text("UPDATE nodes SET updated_at = updated_at WHERE name = 'a'")
            )
        )
        await blocked_by(outside, holding_b, ours)
        # Meanwhile a claim for item 1's namespace commits (a zero limit, so the cluster's sums
        # stay right) and another session holds it.
        await insert_claim(ledger, "late", Resources(), claim_id="late-claim")
        await claim_holder.execute(
            sa.text("SELECT id FROM claims WHERE id = 'late-claim' FOR UPDATE")
        )
        await cluster_holder.rollback()
        results = await batch
        await conn.execute(sa.text(f"ALTER FUNCTION {batch_function.SIGNATURE} {BOUND}"))
        await conn.commit()
        await crossing
        await node_holder.rollback()
        await claim_holder.rollback()
    outcomes = [r.outcome for r in results]
    assert outcomes == [
        Outcome.ADMITTED, Outcome.SOLO, Outcome.ADMITTED, Outcome.DUPLICATE, Outcome.DUPLICATE,
        Outcome.REFUSED, Outcome.NO_NODE, Outcome.REFUSED, Outcome.REFUSED, Outcome.SOLO,
        Outcome.ADMITTED,
    ], [(r.outcome, r.reason) for r in results]  # fmt: skip
    assert "lock_not_available" in results[1].reason
    assert "deadlock_detected" in results[9].reason
    stages = [r.denial.stage.value for r in results if r.denial is not None]
    assert stages == ["node", "claim", "cluster"]
    assert results[5].denial is not None and results[5].denial.exceeded == {"disk_gb"}
    admitted = [i for i, r in enumerate(results) if r.outcome is Outcome.ADMITTED]
    for i in admitted:
        result = results[i]
        assert result.admission is not None and result.admission.placement is not None
        assert result.admission.placement.id == items[i].placement_id
        assert list(result.events) == audit_of(result.admission)  # returned, not written
    assert results[0].admission is not None and results[0].admission.claim_id == capped.claim.id
    # Committed: exactly the admitted items, and the counters are the placements' sums.
    await check_ledger(ledger, {p.id for p in before} | {f"p{i}" for i in admitted})
    assert (await ledger.reconcile()).summary.clean
    node_a = await ledger.node("a")
    assert node_a is not None and node_a.used == Resources(6, 6, 6)  # old + 0 + 2 + 10
    assert [n.used for n in await ledger.nodes() if n.name != "a"] == [Resources(), Resources()]
    assert await claim_used(ledger, capped.claim.id) == SIZE
    assert await claim_used(ledger, "late-claim") == Resources()
    assert (await ledger.cluster()).unclaimed_used == Resources(5, 5, 5)  # old + 2 + 10
    assert await ledger.events() == []  # the executor writes no audit events itself


async def test_the_function_bounds_its_own_lock_waits_for_the_call_alone(
    ledger: SqlLedger, backend: Backend, outside: AsyncEngine
) -> None:
    # The caller waits for ever (lock_timeout 0) and sends no bound: the function's own SET
    # clause makes the element waiting for a held row give up (lock_not_available) and go
    # SOLO, the others commit; after the call the caller's setting is back.
    postgres_only(backend)
    await ledger.add_node(NodeSpec("a", Capacity(8, 8192, 80)))
    await ledger.add_node(NodeSpec("held", Capacity(8, 8192, 80)))
    items = [item("team", "a"), item("team", "held"), item("team", "a", Resources(2, 2, 2))]
    async with ledger.store.engine.connect() as conn, outside.connect() as holder:
        await holder.execute(
            sa.text("UPDATE nodes SET updated_at = updated_at WHERE name = 'held'")
        )
        await conn.execute(sa.text("SET LOCAL lock_timeout = 0"))
        results = await asyncio.wait_for(
            postgres_batch_executor(conn, items, ledger.store.now_epoch(), ClaimEnforcement.HARD),
            timeout=HANG_SECONDS,
        )
        assert (await conn.execute(sa.text("SHOW lock_timeout"))).scalar() == "0"
        await conn.commit()
        await holder.rollback()
    assert [r.outcome for r in results] == [Outcome.ADMITTED, Outcome.SOLO, Outcome.ADMITTED]
    assert "lock_not_available" in results[1].reason
    node_a = await ledger.node("a")
    assert node_a is not None and node_a.used == Resources(3, 3, 3)


async def test_a_refusal_whose_twin_a_later_item_admits_is_read_for_after_the_commit(
    ledger: SqlLedger, backend: Backend
) -> None:
    # The function looked for the request id before the later twin was written: that refusal
    # is read for after the COMMIT (and finds the twin); one with no twin in the batch is not.
    postgres_only(backend)
    await ledger.add_node(NodeSpec("a", Capacity(8, 8192, 80)))
    await ledger.add_node(NodeSpec("c", Capacity(1, 1024, 10)))
    too_big = Resources(4, 2048, 20)
    items = [
        item("team", "c", too_big, request_id="twin"),
        item("team", "c", too_big, request_id="alone"),
        item("team", "nowhere", request_id="twin"),
        item("team", "a", request_id="twin"),
    ]
    items = [BatchItem(it.request, f"p{i}", it.audit) for i, it in enumerate(items)]
    async with ledger.store.engine.begin() as conn:
        results = await postgres_batch_executor(conn, items, 0.0, ClaimEnforcement.HARD)
    outcomes = [(r.outcome, r.repeat_checked) for r in results]
    assert outcomes == [
        (Outcome.REFUSED, False), (Outcome.REFUSED, True), (Outcome.NO_NODE, False),
        (Outcome.ADMITTED, False),
    ]  # fmt: skip


async def test_advisory_overruns_and_unenforced_writes_go_solo_and_change_nothing(
    ledger: SqlLedger, backend: Backend
) -> None:
    postgres_only(backend)
    await ledger.add_node(NodeSpec("a", Capacity(8, 8192, 80)))
    claimed = await ledger.create_claim(ClaimRequest("capped", Resources(1, 1, 1), HOUR))
    assert claimed.claim is not None
    before = await state(ledger)
    items = [
        item("capped", "a", Resources(2, 1, 1)),  # past the claim: the caller charges overage
        BatchItem(AdmitRequest("team", "a", SIZE, enforce=False), "p-unenforced"),
    ]
    async with ledger.store.engine.begin() as conn:
        results = await postgres_batch_executor(
            conn, items, ledger.store.now_epoch(), ClaimEnforcement.ADVISORY
        )
    assert [r.outcome for r in results] == [Outcome.SOLO, Outcome.SOLO]
    assert "advisory claim" in results[0].reason and "unenforced" in results[1].reason
    assert await state(ledger) == before
    # Unenforced only: not one statement is sent.
    async with ledger.store.engine.begin() as conn:
        statements: list[str] = []
        hook = after_first(ledger, "", lambda c, cursor: statements.append("sent"))
        try:
            only = await postgres_batch_executor(conn, items[1:], 0.0, ClaimEnforcement.ADVISORY)
        finally:
            sa.event.remove(ledger.store.engine.sync_engine, "after_cursor_execute", hook)
    assert [r.outcome for r in only] == [Outcome.SOLO] and statements == []


async def test_an_error_other_than_a_repeated_request_id_fails_the_whole_call(
    ledger: SqlLedger, backend: Backend
) -> None:
    postgres_only(backend)
    await ledger.add_node(NodeSpec("a", Capacity(8, 8192, 80)))
    before = await state(ledger)
    twins = [BatchItem(AdmitRequest("team", "a", SIZE), "same-id") for _ in range(2)]
    with pytest.raises(IntegrityError, match="pk_placements"):  # the caller splits the batch
        async with ledger.store.engine.begin() as conn:
            await postgres_batch_executor(
                conn, twins, ledger.store.now_epoch(), ClaimEnforcement.ADVISORY
            )
    assert await state(ledger) == before


async def test_a_missing_cluster_row_is_a_ledger_error(ledger: SqlLedger, backend: Backend) -> None:
    postgres_only(backend)
    await ledger.add_node(NodeSpec("a", Capacity(8, 8192, 80)))
    async with ledger.store.engine.connect() as conn:
        await conn.execute(sa.text("DELETE FROM cluster"))
        with pytest.raises(LedgerError, match="cluster row is missing"):
            await postgres_batch_executor(
                conn, [item("team", "a")], ledger.store.now_epoch(), ClaimEnforcement.ADVISORY
            )
        await conn.rollback()
    assert (await ledger.cluster()).total == Resources(24, 8192, 80)


# --- faults ------------------------------------------------------------------------------------


@pytest.mark.parametrize("when", ["before", "after"])
async def test_a_connection_killed_around_the_batch_call_commits_nothing(
    ledger: SqlLedger, backend: Backend, when: str
) -> None:
    postgres_only(backend)
    await ledger.add_node(NodeSpec("a", Capacity(8, 8192, 80)))
    await ledger.admit(AdmitRequest("team", "a", SIZE))
    before = await state(ledger)
    items = [item("team", "a"), item("team", "a", Resources(2, 2, 2), request_id="r")]
    killer = create_async_engine(backend.url)
    results: list[ItemResult] | None = None
    hook = None
    try:
        with pytest.raises(DBAPIError):  # the call (before) or the COMMIT (after) fails
            async with ledger.store.engine.begin() as conn:
                victim = await pid_of(conn)  # asked first: the hook must not reuse the cursor

                def cut(*_: Any) -> None:
                    await_only(kill_session(killer, backend.kind, victim))

                hook = after_first(ledger, "SELECT FG_INDEX", cut, when)
                results = await postgres_batch_executor(
                    conn, items, ledger.store.now_epoch(), ClaimEnforcement.ADVISORY
                )
    finally:
        if hook is not None:
            sa.event.remove(ledger.store.engine.sync_engine, f"{when}_cursor_execute", hook)
        await killer.dispose()
    if when == "after":  # the server answered before it lost the connection
        assert results is not None and [r.outcome for r in results] == [Outcome.ADMITTED] * 2
    else:
        assert results is None
    assert await state(ledger) == before
    # A fresh connection admits the same batch, once.
    async with ledger.store.engine.begin() as conn:
        again = await postgres_batch_executor(
            conn, items, ledger.store.now_epoch(), ClaimEnforcement.ADVISORY
        )
    assert [r.outcome for r in again] == [Outcome.ADMITTED] * 2
    await check_ledger(ledger)
    assert len(await ledger.placements()) == 3


# --- the same as one by one ----------------------------------------------------------------

DB_SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


async def arrange(ledger: SqlLedger, batch: dict[str, Any]) -> None:
    await empty(ledger)
    for name, (threads, memory, disk, load, schedulable) in batch["nodes"].items():
        await ledger.add_node(NodeSpec(name, Capacity(threads, memory, disk)))
        await ledger.publish_metrics(name, NodeMetrics(load, schedulable))
    if batch["claim"] is not None:
        await ledger.create_claim(ClaimRequest("claimed", batch["claim"], HOUR))


def requests_of(batch: dict[str, Any]) -> list[AdmitRequest]:
    return [
        AdmitRequest(
            r["namespace"], r["node"], r["resources"],
            demand=r["resources"].cpus * r["demand_per_cpu"], target_load=r["target_load"],
            request_id=r["request_id"], placement_id=f"p{i}",
        )
        for i, r in enumerate(batch["requests"])
    ]  # fmt: skip


async def admit_alone(
    ledger: SqlLedger, request: AdmitRequest, enforcement: ClaimEnforcement
) -> Admission | None:
    """In-process, one transaction; None for a node that does not exist."""
    try:
        return await admission.admit(ledger.store, request, enforcement, one_call=False)
    except NodeNotFound:
        return None


def unnamed(value: Any) -> Any:
    """``value`` with its claim id (a fresh uuid in each run) replaced by whether it has one."""
    if isinstance(value, Claim):
        return dataclasses.replace(value, id="claim")
    for field in ("claim_id", "placement"):
        if hasattr(value, field) and getattr(value, field) is not None:
            inner = getattr(value, field)
            value = dataclasses.replace(value, **{field: "claim" if field == "claim_id" else
                                                  unnamed(inner)})  # fmt: skip
    return value


async def outcome_state(ledger: SqlLedger) -> tuple[Any, ...]:
    return (await ledger.nodes(), await ledger.cluster(),
            [unnamed(p) for p in await ledger.placements()],
            [unnamed(c) for c in await ledger.claims()])  # fmt: skip


@DB_SETTINGS
@given(batch=admission_batches())
async def test_a_batch_admits_what_one_by_one_admits(
    ledger: SqlLedger, backend: Backend, batch: dict[str, Any]
) -> None:
    postgres_only(backend)
    enforcement = enforcement_of(batch["enforcement"])
    requests = requests_of(batch)
    await arrange(ledger, batch)
    items = [BatchItem(r, str(r.placement_id)) for r in requests]
    async with ledger.store.engine.begin() as conn:
        results = await postgres_batch_executor(conn, items, ledger.store.now_epoch(), enforcement)
    for outcome in {r.outcome for r in results}:
        event(outcome.value)
    # What group commit does next: each SOLO item alone (it changed nothing in the batch).
    solo = [i for i, r in enumerate(results) if r.outcome is Outcome.SOLO]
    assert all("advisory claim" in results[i].reason for i in solo), results
    alone = {i: await admit_alone(ledger, requests[i], enforcement) for i in solo}
    batched = await outcome_state(ledger)
    await check_ledger(ledger)
    # The same requests one by one: the batch's items in order, then the SOLO ones.
    await arrange(ledger, batch)
    order = [i for i in range(len(requests)) if i not in alone] + solo
    reference = {i: await admit_alone(ledger, requests[i], enforcement) for i in order}
    assert await outcome_state(ledger) == batched
    for i, result in enumerate(results):
        one = reference[i]
        fresh = one is not None and one.admitted and not one.replayed
        assert (result.outcome is Outcome.ADMITTED) == (fresh and i not in alone), (i, result)
        if result.outcome is Outcome.ADMITTED:
            assert one is not None and unnamed(result.admission) == unnamed(one)
        if result.outcome is Outcome.REFUSED:  # or, as group commit finds, a replay
            assert one is not None and (one.denial == result.denial or one.replayed)
        if result.outcome is Outcome.DUPLICATE:
            assert one is not None and one.replayed
        if result.outcome is Outcome.NO_NODE:
            assert one is None or one.replayed


# --- the migration -----------------------------------------------------------------------------


async def test_revisions_0005_and_0004_downgrade_and_upgrade_again(
    ledger: SqlLedger, backend: Backend
) -> None:
    async def installed() -> tuple[str | None, str | None]:
        """Each function's digest comment (None: not there), and that of the batch's setting."""
        async with ledger.store.engine.connect() as conn:
            found = await conn.execute(
                sa.text(
                    "SELECT obj_description(to_regprocedure(:a), 'pg_proc'),"
                    " obj_description(to_regprocedure(:b), 'pg_proc')"
                ),
                {"a": admit_function.SIGNATURE, "b": batch_function.SIGNATURE},
            )
            admit, batch = found.one()
            return admit, batch

    def downgrade(conn: sa.Connection, revision: str) -> str | None:
        cfg = alembic_config()
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)
        return current_revision(conn)

    async def down_to(revision: str) -> None:
        async with ledger.store.engine.connect() as conn:
            assert await conn.run_sync(downgrade, revision) == revision
            await conn.commit()

    then = import_module("fleetgate.adapters.sql.migrations.versions.0005_function_repeat_check")
    # The kept text is the one its digest was made of (as each function's ``digest`` makes it).
    digests = {
        then.ADMIT_0004: then.ADMIT_0004,
        then.BATCH_0004: f"{then.BATCH_0004}\n{then.ADMIT_0004_DIGEST}",
    }
    for text, digest in ((then.ADMIT_0004, then.ADMIT_0004_DIGEST),
                         (then.BATCH_0004, then.BATCH_0004_DIGEST)):  # fmt: skip
        assert hashlib.sha256(digests[text].encode()).hexdigest()[:32] == digest
    assert "SET lock_timeout" not in then.BATCH_0004 and "duplicate" in then.BATCH_0004
    assert "PERFORM placements" not in then.ADMIT_0004
    try:
        await down_to("0004_admit_batch_function")
        if backend.kind == "postgres":
            # Revision 0004's functions, as its code recorded them: this code's are not there,
            # so this code admits in-process (the 0004 code would find them current).
            assert await installed() == (
                stored_functions.marker(then.ADMIT_0004_DIGEST),
                stored_functions.marker(then.BATCH_0004_DIGEST),
            )
            async with ledger.store.engine.connect() as conn:
                assert not await admit_function.installed(conn)
                assert not await batch_function.installed(conn)
                setting = await conn.execute(
                    sa.text("SELECT proconfig FROM pg_proc WHERE oid = to_regprocedure(:b)"),
                    {"b": batch_function.SIGNATURE},
                )
                assert setting.scalar() is None  # 0004's batch carried no lock_timeout
        await down_to("0003_admit_function")
        if backend.kind == "postgres":
            admit, batch = await installed()
            assert admit == stored_functions.marker(then.ADMIT_0004_DIGEST) and batch is None
    finally:
        assert await ledger.migrate() == "0006_reservations"
    if backend.kind == "postgres":
        assert await installed() == (
            stored_functions.marker(admit_function.digest()),
            stored_functions.marker(batch_function.digest()),
        )
        async with ledger.store.engine.connect() as conn:
            assert await admit_function.installed(conn)
            assert await batch_function.installed(conn)
            stale = f"COMMENT ON FUNCTION {batch_function.SIGNATURE} IS 'fleetgate 0'"
            await conn.exec_driver_sql(stale)
            assert not await batch_function.installed(conn)  # a stale digest is not current
            await conn.rollback()
