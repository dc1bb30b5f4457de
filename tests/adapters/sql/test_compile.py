"""The guards compiled to SQL agree with the domain's evaluator, predicate by predicate.

Every predicate of the node and cluster guards is evaluated by the database under test on a
generated row and compared with ``guards.truth_of`` (including NULLs and float boundaries). The
E5 sweep then pins the phase-4a demand clause and shows the property test can fail: the
reference's charged clause, compiled the same way, refuses exactly the cells the seed counted.
"""

from __future__ import annotations

import dataclasses

import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings

from fleetgate.adapters.sql.compile import predicate, where
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.adapters.sql.schema import CLUSTER_ID, cluster, nodes
from fleetgate.domain.capacity.dimensions import Capacity
from fleetgate.domain.capacity.guards import (
    CLUSTER_GUARD,
    DEMAND_CLAUSE,
    Guard,
    evaluate,
    node_guard,
    truth_of,
)
from fleetgate.domain.capacity.model import NodeSpec
from tests.strategies import admit_params, cluster_guard_rows, node_guard_rows

DB_SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def as_truth(value: object) -> bool | None:
    return None if value is None else bool(value)


async def sql_truths(
    ledger: SqlLedger, table: sa.Table, key: sa.ColumnElement[bool], guard: Guard, params: dict
) -> tuple[list[bool | None], bool]:
    """Each predicate's value and the whole WHERE's verdict, computed by the database."""
    columns = [predicate(t, table, params).label(f"p{i}") for i, (_, t) in enumerate(guard.tests())]
    async with ledger.store.engine.connect() as conn:
        row = (await conn.execute(sa.select(*columns).where(key))).one()
        hit = await conn.execute(sa.select(sa.func.count()).where(key, where(guard, table, params)))
        return [as_truth(v) for v in row], hit.scalar_one() == 1


async def put_node_row(ledger: SqlLedger, row: dict[str, object]) -> None:
    async with ledger.store.engine.begin() as conn:
        await conn.execute(sa.update(nodes).where(nodes.c.name == "probe").values(**row))


@DB_SETTINGS
@given(row=node_guard_rows(), params=admit_params())
async def test_node_guard_predicates_agree(
    ledger: SqlLedger, row: dict[str, object], params: dict[str, float | int]
) -> None:
    if await ledger.node("probe") is None:
        await ledger.add_node(NodeSpec("probe", Capacity(1, 1, 1)))
    await put_node_row(ledger, row)
    guard = node_guard(float(params["target_load"]))
    truths, admitted = await sql_truths(ledger, nodes, nodes.c.name == "probe", guard, params)
    assert truths == [truth_of(t, row, params) for _, t in guard.tests()]
    assert admitted == evaluate(guard, row, params).passed


@DB_SETTINGS
@given(row=cluster_guard_rows(), params=admit_params())
async def test_cluster_guard_predicates_agree(
    ledger: SqlLedger, row: dict[str, object], params: dict[str, float | int]
) -> None:
    async with ledger.store.engine.begin() as conn:
        await conn.execute(sa.update(cluster).where(cluster.c.id == CLUSTER_ID).values(**row))
    key = cluster.c.id == CLUSTER_ID
    truths, admitted = await sql_truths(ledger, cluster, key, CLUSTER_GUARD, params)
    assert truths == [truth_of(t, row, params) for _, t in CLUSTER_GUARD.tests()]
    assert admitted == evaluate(CLUSTER_GUARD, row, params).passed


async def test_float_sums_are_compared_as_doubles(ledger: SqlLedger) -> None:
    # 0.1 + 0.2 > 0.3 in IEEE doubles; an exact-decimal database would say <=.
    await ledger.add_node(NodeSpec("probe", Capacity(1, 1, 1)))
    row = {"cpu_load_1": 0.1, "expected_demand": 0.2, "cpu_schedulable": 1}
    await put_node_row(ledger, row)
    params = {"cpus": 0, "memory_mb": 0, "disk_gb": 0, "demand": 0.0, "target_load": 0.3}
    guard = Guard("node", (), (DEMAND_CLAUSE,))
    truths, _ = await sql_truths(ledger, nodes, nodes.c.name == "probe", guard, params)
    assert truths == [False] == [truth_of(t, {**row}, params) for _, t in guard.tests()]


async def e5_admitted_cells(ledger: SqlLedger, guard: Guard, per_vcpu: float) -> int:
    """Cells of cpu_schedulable 1..16 x cpus {1,2,4,8,16} the database admits, idle node."""
    await ledger.add_node(NodeSpec("probe", Capacity(64, 1, 1)))
    admitted = 0
    for schedulable in range(1, 17):
        row = {"cpu_load_1": 0.0, "expected_demand": 0.0, "cpu_schedulable": schedulable}
        await put_node_row(ledger, row)
        for cpus in (1, 2, 4, 8, 16):
            params = {"cpus": cpus, "memory_mb": 0, "disk_gb": 0,
                      "demand": cpus * per_vcpu, "target_load": 0.75}  # fmt: skip
            _, ok = await sql_truths(ledger, nodes, nodes.c.name == "probe", guard, params)
            admitted += ok
    return admitted


async def test_e5_the_phase_4a_clause_admits_every_cell(ledger: SqlLedger) -> None:
    assert await e5_admitted_cells(ledger, Guard("node", (), (DEMAND_CLAUSE,)), 0.6) == 80


async def test_e5_the_charged_clause_would_fail_the_sweep(ledger: SqlLedger) -> None:
    # The mutation the sweep exists to catch: the request's charge on the left-hand side.
    charged = Guard("node", (), (dataclasses.replace(DEMAND_CLAUSE, charged=True),))
    assert await e5_admitted_cells(ledger, charged, 2.5) == 26
    await ledger.remove_node("probe")
    assert await e5_admitted_cells(ledger, charged, 0.6) == 58
