"""The admission as one PostgreSQL function: generated from the guards, installed by Alembic,
used only while current.

What it admits is held equal to the domain by the same tests as the in-process path
(``test_admission``, ``test_compile``, ``test_concurrency``, ``test_faults``): on PostgreSQL the
ledger admits through it.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from fleetgate.adapters.sql import admit_function, prepared
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.adapters.sql.schema import CLUSTER_ID, claims, cluster, nodes
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.guards import (
    CLAIM_GUARD,
    CLUSTER_GUARD,
    NODE_GUARD,
    NODE_GUARD_WAIVED,
)
from fleetgate.domain.capacity.model import AdmitRequest, NodeSpec
from tests.conftest import Backend
from tests.ledgers import open_ledger


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
