"""Prepared hot statements are the very SQL the dynamic builders make, with the same values.

The admission runs its guarded UPDATEs from ``prepared`` (built once, values bound by name);
refusals and every other write still build them from ``compile.where``. Both must send the
database the same text and the same parameters, in the same order, on every dialect.
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.engine import Dialect

from fleetgate.adapters.sql import prepared
from fleetgate.adapters.sql.compile import where
from fleetgate.adapters.sql.schema import claims, cluster, nodes
from fleetgate.adapters.sql.sqltypes import integer, real
from fleetgate.domain.capacity.dimensions import ALLOCATION, Resources
from fleetgate.domain.capacity.guards import CLAIM_GUARD, CLUSTER_GUARD, node_guard

DIALECTS = [sqlite.dialect(), postgresql.asyncpg.dialect(), mysql.aiomysql.dialect()]
NOW = 1_767_225_600.25


def increments(table: sa.Table, prefix: str, amount: Resources) -> dict[str, Any]:
    """The dynamic form of a charge: ``{prefix}d = {prefix}d + amount_d`` per dimension."""
    return {f"{prefix}{d}": table.c[f"{prefix}{d}"] + integer(amount.get(d)) for d in ALLOCATION}


def sent(statement: sa.Update, dialect: Dialect, binds: dict[str, Any] | None = None) -> tuple:
    """The SQL text and the positional parameter values the driver would receive."""
    compiled = statement.compile(dialect=dialect)
    values = compiled.construct_params(binds)
    order = compiled.positiontup or []
    return compiled.string, [values[name] for name in order]


@pytest.mark.parametrize("dialect", DIALECTS, ids=lambda d: d.name)
@pytest.mark.parametrize(
    ("size", "demand", "target_load"),
    [
        (Resources(1, 1024, 10), 0.6, 0.75),
        (Resources(0, 0, 0), 0.0, 0.0),
        (Resources(7, 3, 2), 2, 1),
    ],
)
def test_the_node_charge_is_the_dynamic_one(
    dialect: Dialect, size: Resources, demand: float, target_load: float
) -> None:
    params = {**size.as_dict(), "demand": demand, "target_load": target_load}
    guard = node_guard(target_load)
    dynamic = (
        sa.update(nodes)
        .where(sa.and_(nodes.c.name == "n-1", where(guard, nodes, params)))
        .values(
            **increments(nodes, "used_", size),
            expected_demand=nodes.c.expected_demand + real(demand),
            updated_at=NOW,
        )
    )
    sets = prepared.charge_sets("used_", size, NOW, demand=demand)
    statement, binds = prepared.guarded_update(nodes, {("name", "eq"): "n-1"}, guard, params, sets)
    assert sent(statement, dialect, binds) == sent(dynamic, dialect)


@pytest.mark.parametrize("dialect", DIALECTS, ids=lambda d: d.name)
def test_the_cluster_and_claim_charges_are_the_dynamic_ones(dialect: Dialect) -> None:
    size = Resources(3, 2048, 40)
    dynamic_cluster = (
        sa.update(cluster)
        .where(sa.and_(cluster.c.id == 1, where(CLUSTER_GUARD, cluster, size.as_dict())))
        .values(**increments(cluster, "unclaimed_used_", size), updated_at=NOW)
    )
    statement, binds = prepared.guarded_update(
        cluster,
        {("id", "eq"): 1},
        CLUSTER_GUARD,
        size.as_dict(),
        prepared.charge_sets("unclaimed_used_", size, NOW),
    )
    assert sent(statement, dialect, binds) == sent(dynamic_cluster, dialect)
    active = sa.and_(claims.c.active_namespace == "team", claims.c.expires_at > NOW)
    keys = {("active_namespace", "eq"): "team", ("expires_at", "gt"): NOW}
    for guard in (None, CLAIM_GUARD):
        condition = (
            active if guard is None else sa.and_(active, where(guard, claims, size.as_dict()))
        )
        dynamic = (
            sa.update(claims)
            .where(condition)
            .values(**increments(claims, "used_", size), updated_at=NOW)
        )
        statement, binds = prepared.guarded_update(
            claims, keys, guard, size.as_dict(), prepared.charge_sets("used_", size, NOW)
        )
        assert sent(statement, dialect, binds) == sent(dynamic, dialect)


def test_a_shape_is_built_once() -> None:
    size = Resources(1, 1, 1)
    first, _ = prepared.guarded_update(
        cluster,
        {("id", "eq"): 1},
        CLUSTER_GUARD,
        size.as_dict(),
        prepared.charge_sets("unclaimed_used_", size, 1.0),
    )
    again, binds = prepared.guarded_update(
        cluster, {("id", "eq"): 1}, CLUSTER_GUARD, {"cpus": 9, "memory_mb": 9, "disk_gb": 9},
        prepared.charge_sets("unclaimed_used_", Resources(9, 9, 9), 2.0),
    )  # fmt: skip
    assert again is first
    assert binds["g_cpus"] == 9 and binds["s_updated_at"] == 2.0


def test_nothing_is_built_again_for_the_next_admission() -> None:
    """The SET keys and the statement of a second admission are the first one's objects."""
    first = prepared.charge_sets("used_", Resources(1, 2, 3), 1.0, demand=0.5)
    second = prepared.charge_sets("used_", Resources(4, 5, 6), 2.0, demand=0.7)
    assert all(a is b for a, b in zip(first, second, strict=True))
    params = {"cpus": 1, "memory_mb": 2, "disk_gb": 3, "demand": 0.5, "target_load": 0.75}
    one, _ = prepared.guarded_update(nodes, {("name", "eq"): "a"}, node_guard(0.75), params, first)
    two, binds = prepared.guarded_update(
        nodes, {("name", "eq"): "b"}, node_guard(0.9), {**params, "cpus": 4}, second
    )
    assert one is two and binds["k_name"] == "b" and binds["g_cpus"] == 4
