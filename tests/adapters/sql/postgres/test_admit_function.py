"""The admission as one PostgreSQL function: generated from the guards, installed by Alembic,
used only while current.

What it admits is held equal to the domain by the same tests as the in-process path
(``test_admission``, ``test_compile``, ``test_concurrency``, ``test_faults``): on PostgreSQL the
ledger admits through it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from fleetgate.adapters.sql import admission, prepared
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.adapters.sql.postgres import admit_function
from fleetgate.adapters.sql.schema import CLUSTER_ID, claims, cluster, nodes
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.errors import NodeNotFound
from fleetgate.domain.capacity.guards import (
    CLAIM_GUARD,
    CLUSTER_GUARD,
    NODE_GUARD,
    NODE_GUARD_WAIVED,
)
from fleetgate.domain.capacity.model import Admission, AdmitRequest, NodeSpec
from tests.conftest import Backend
from tests.ledgers import open_ledger

SIZE = Resources(1, 1, 1)
#: More than the full node's limits (3 vCPUs, 1024 MB, 10 GB) in every dimension.
TOO_BIG = Resources(4, 2048, 20)


def test_each_guarded_update_is_the_in_process_statement() -> None:
    text = admit_function.definition()
    size = Resources(1, 1, 1)
    params = {**size.as_dict(), "demand": 0.5, "target_load": 0.5}
    shapes = [
        (nodes, {("name", "eq"): ""}, NODE_GUARD, "used_", 0.5),
        (nodes, {("name", "eq"): ""}, NODE_GUARD_WAIVED, "used_", 0.5),
        (claims, {("active_namespace", "eq"): "", ("expires_at", "gt"): 0.0}, CLAIM_GUARD,
         "used_", None),
        (cluster, {("id", "eq"): CLUSTER_ID}, CLUSTER_GUARD, "unclaimed_used_", None),
    ]  # fmt: skip
    for table, keys, guard, prefix, demand in shapes:
        sets = prepared.charge_sets(prefix, size, 0.0, demand=demand)
        statement, _ = prepared.guarded_update(table, keys, guard, params, sets, returning=True)
        assert f"{admit_function._sql(statement)} INTO" in text
    # the placeholders are the function's arguments, the guard's own constants inlined
    assert "claims.used_cpus + p_cpus::BIGINT <= claims.limit_cpus" in text
    assert "coalesce(nodes.cpu_load_1, CAST(0.0 AS DOUBLE PRECISION))" in text
    assert ":g_" not in text and ":k_" not in text and ":s_" not in text


def test_the_digest_follows_the_text() -> None:
    statements = admit_function.install_statements()
    assert statements[0] == admit_function.definition()
    assert admit_function.digest() in statements[1]
    assert len(admit_function.digest()) == 32


async def test_a_stale_function_is_not_used(backend: Backend) -> None:
    if backend.kind != "postgres":
        pytest.skip("the admission function is PostgreSQL's; the other backends admit in-process")
    async with open_ledger(backend) as ledger:
        assert ledger.one_call
        await ledger.add_node(NodeSpec("a", Capacity(4, 4096, 40)))
        comment = f"COMMENT ON FUNCTION {admit_function.SIGNATURE} IS 'fleetgate 0'"
        async with ledger.store.engine.begin() as conn:
            await conn.exec_driver_sql(comment)
        try:
            await ledger.start()  # as a process starting against a database not yet upgraded
            assert not ledger.one_call
            admitted = await ledger.admit(AdmitRequest("team", "a", Resources(1, 1, 1)))
            assert admitted.admitted  # in-process
        finally:
            async with ledger.store.engine.begin() as conn:
                await conn.exec_driver_sql(admit_function.install_statements()[1])
        await ledger.start()
        assert ledger.one_call


async def test_other_backends_admit_in_process(ledger: SqlLedger, backend: Backend) -> None:
    assert ledger.one_call is (backend.kind == "postgres")
    if backend.kind == "postgres":
        async with ledger.store.engine.connect() as conn:
            found = await conn.execute(
                sa.text("SELECT to_regprocedure(:s) IS NOT NULL"), {"s": admit_function.SIGNATURE}
            )
            assert found.scalar() is True


# --- a refusal looks for the request id's earlier placement itself -----------------------------


@contextlib.contextmanager
def recorded(ledger: SqlLedger) -> Iterator[list[str]]:
    """Every statement the ledger's engine sends meanwhile (one line each, upper case)."""
    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(" ".join(statement.split()).upper())

    engine = ledger.store.engine.sync_engine
    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        yield statements
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)


def reads_by_request_id(statements: list[str]) -> list[str]:
    """The reads for an earlier placement of a request id (``reads.placement_by_request``)."""
    return [s for s in statements if s.startswith("SELECT") and "FROM PLACEMENTS" in s]


def test_only_the_refusals_look_for_an_earlier_placement() -> None:
    text = admit_function.definition()
    look = "IF p_request_id IS NOT NULL THEN PERFORM placements.id"
    # Before each refusal and each unknown node, never on the admitted path or the others.
    assert text.count(look) == len(admit_function.REPEAT_CHECKED)  # each returned in one place
    admitted = text.split("-- 3. The placement row")[1]
    assert look not in admitted
    for outcome in admit_function.REPEAT_CHECKED:
        before = text.split(f"RETURN QUERY SELECT '{outcome}'")[0]
        assert before.rstrip().endswith("END IF; END IF;"), outcome


@pytest.fixture
async def full(ledger: SqlLedger, backend: Backend) -> SqlLedger:
    """PostgreSQL's ledger on the one-call path, with a roomy node and a full one."""
    if backend.kind != "postgres":
        pytest.skip("the admission function is PostgreSQL's; the other backends admit in-process")
    assert ledger.one_call
    await ledger.add_node(NodeSpec("roomy", Capacity(16, 65536, 1000)))
    await ledger.add_node(NodeSpec("full", Capacity(1, 1024, 10)))
    return ledger


async def test_a_refused_repeat_answers_its_earlier_placement(full: SqlLedger) -> None:
    first = await full.admit(AdmitRequest("team", "roomy", TOO_BIG, request_id="r1"))
    assert first.admitted
    with recorded(full) as statements:
        # A retry ranked onto another node, which refuses it (node guard); then one onto a
        # node that has gone: both are the first attempt's placement again.
        refused = await full.admit(AdmitRequest("team", "full", TOO_BIG,
                                                request_id="r1"))  # fmt: skip
        gone = await full.admit(AdmitRequest("team", "nowhere", TOO_BIG,
                                             request_id="r1"))  # fmt: skip
    for again in (refused, gone):
        assert again.replayed and again.placement == first.placement
    assert len(reads_by_request_id(statements)) == 2  # the function said "duplicate": read it
    assert [p.request_id for p in await full.placements()] == ["r1"]


async def test_a_refused_new_request_is_answered_with_no_read_after(full: SqlLedger) -> None:
    assert (await full.admit(AdmitRequest("team", "roomy", SIZE, request_id="other"))).admitted
    with recorded(full) as statements:
        refused = await full.admit(AdmitRequest("team", "full", TOO_BIG,
                                                request_id="new"))  # fmt: skip
        with pytest.raises(NodeNotFound):
            await full.admit(AdmitRequest("team", "nowhere", SIZE, request_id="new"))
    assert refused.denial is not None and refused.denial.exceeded == {
        "cpus",
        "memory_mb",
        "disk_gb",
    }
    assert not refused.replayed
    body = [s for s in statements if not s.startswith(("BEGIN", "COMMIT", "ROLLBACK"))]
    assert len(body) == 2 and all("FLEETGATE_ADMIT(" in s for s in body), body
    assert reads_by_request_id(statements) == []


async def test_a_refused_repeat_of_a_released_placement_is_admitted_afresh(
    full: SqlLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The earlier placement fills the node; the retry is refused there and the function finds
    # the placement, which is released before the caller reads it: the request id is free
    # again, and the node has room, so the request is admitted anew (once), not refused.
    size = Resources(1, 1024, 10)
    first = await full.admit(AdmitRequest("team", "full", size, request_id="r1"))
    assert first.placement is not None
    read = admission.replay_of

    async def released_meanwhile(store: Any, request: AdmitRequest) -> Admission | None:
        assert first.placement is not None
        await full.release(first.placement.id)
        monkeypatch.setattr(admission, "replay_of", read)
        return await read(store, request)

    monkeypatch.setattr(admission, "replay_of", released_meanwhile)
    again = await full.admit(AdmitRequest("team", "full", size, request_id="r1"))
    assert again.admitted and not again.replayed and again.placement is not None
    assert again.placement.id != first.placement.id
    assert [p.request_id for p in await full.placements()] == ["r1"]
