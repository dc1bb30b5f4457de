"""The admission's hot statements, built once per shape and executed with named parameters.

Building a guarded UPDATE compiles the guard into an expression tree, and SQLAlchemy then walks
the whole tree to find its cached compiled form: together most of an admission's client CPU (the
benchmarks measured it). A statement built here from named placeholders is the same SQL, made
once per shape (table, key, guard, which parameters are floats, what is set) and reused: its
cache key is computed once, and each admission only binds its values. ``compile.where`` is still
the one SQL evaluator of a guard; here it is given placeholders instead of values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

import sqlalchemy as sa

from fleetgate.adapters.sql.compile import Value, where
from fleetgate.adapters.sql.schema import claims
from fleetgate.adapters.sql.sqltypes import as_double
from fleetgate.domain.capacity.dimensions import ALLOCATION, Resources
from fleetgate.domain.capacity.guards import (
    Add,
    AnyOf,
    AtMost,
    Coalesce,
    Expr,
    Guard,
    IsNull,
    Mul,
    Param,
    Sub,
    Test,
)

Number = int | float
_BIGINT: sa.BigInteger = sa.BigInteger()
_DOUBLE: sa.Double[float] = sa.Double()


@dataclass(frozen=True)
class Bump:
    """``SET column = column + :value`` (a DOUBLE addition when ``real``)."""

    column: str
    real: bool = False


@dataclass(frozen=True)
class Assign:
    """``SET column = :value``."""

    column: str


Set = Bump | Assign
#: A row's key: ``(column, "eq" | "gt")`` to the value it is compared with.
Keys = Mapping[tuple[str, str], Any]


def charge_sets(
    prefix: str, amount: Resources, now: float, demand: float | None = None
) -> dict[Set, Any]:
    """The SET clauses of one charge: ``{prefix}d += amount_d``, the demand, ``updated_at``.

    The one builder of a charge's SET clause: the guarded fast path, the refusal's fallback and
    a move's target node all charge through it (``demand``: added to ``expected_demand``).
    """
    bumps, demand_bump, stamp = _charge_keys(prefix)
    sets: dict[Set, Any] = dict(zip(bumps, [getattr(amount, d) for d in ALLOCATION], strict=True))
    if demand is not None:
        sets[demand_bump] = demand
    sets[stamp] = now
    return sets


def credit_sets(
    prefix: str, amount: Resources, now: float, demand: float | None = None
) -> dict[Set, Any]:
    """The SET clauses of a credit that needs no floor: ``charge_sets`` of the amount taken off
    (``{prefix}d += -amount_d``, the demand likewise). Only under a guard that the row holds the
    credit (``domain.capacity.credits``): the counters never go below zero."""
    bumps, demand_bump, stamp = _charge_keys(prefix)
    sets: dict[Set, Any] = dict(zip(bumps, [-getattr(amount, d) for d in ALLOCATION], strict=True))
    if demand is not None:
        sets[demand_bump] = -demand
    sets[stamp] = now
    return sets


@lru_cache(maxsize=8)
def _charge_keys(prefix: str) -> tuple[tuple[Bump, ...], Bump, Assign]:
    # The same key objects every time: the statement cache then compares them by identity.
    bumps = tuple(Bump(f"{prefix}{d}") for d in ALLOCATION)
    return bumps, Bump("expected_demand", real=True), Assign("updated_at")


def _params_of(expr: Expr | Test) -> set[Param]:
    match expr:
        case Param():
            return {expr}
        case Add(a, b) | Sub(a, b) | Mul(a, b) | AtMost(a, b) | Coalesce(a, b):
            return _params_of(a) | _params_of(b)
        case IsNull(inner):
            return _params_of(inner)
        case AnyOf(terms):
            return set().union(*(_params_of(t) for t in terms))
    return set()


# Caches keyed by the guard's identity: hashing a Guard walks its whole tree (tens of us a
# time), and the guards an admission uses are a handful of module constants. The guard itself is
# kept with the entry, so an id is never reused while it is cached.
_PARAMS_BY_GUARD: dict[int, tuple[Guard, tuple[Param, ...]]] = {}
_STATEMENTS: dict[tuple[Any, ...], tuple[Guard | None, sa.Update]] = {}
_CACHE_LIMIT = 256


def _guard_params(guard: Guard) -> tuple[Param, ...]:
    hit = _PARAMS_BY_GUARD.get(id(guard))
    if hit is not None and hit[0] is guard:
        return hit[1]
    found: set[Param] = set()
    for _, test in guard.tests():
        found |= _params_of(test)
    params = tuple(sorted(found, key=lambda p: p.name))
    if len(_PARAMS_BY_GUARD) < _CACHE_LIMIT:
        _PARAMS_BY_GUARD[id(guard)] = (guard, params)
    return params


def _reals(guard: Guard | None, params: Mapping[str, Number]) -> frozenset[str]:
    if guard is None:
        return frozenset()
    return frozenset(
        p.name for p in _guard_params(guard) if p.real or isinstance(params[p.name], float)
    )


def _conditions(table: sa.Table, keys: tuple[tuple[str, str], ...]) -> list[Any]:
    ops = {"eq": lambda c, b: c == b, "gt": lambda c, b: c > b}
    return [ops[op](table.c[col], sa.bindparam(f"k_{col}")) for col, op in keys]


def _key_binds(keys: Keys) -> dict[str, Any]:
    return {f"k_{col}": value for (col, _), value in keys.items()}


def _update(
    table: sa.Table,
    keys: tuple[tuple[str, str], ...],
    guard: Guard | None,
    reals: frozenset[str],
    sets: tuple[Set, ...],
    returning: bool,
) -> sa.Update:
    key = (table, keys, None if guard is None else id(guard), reals, sets, returning)
    hit = _STATEMENTS.get(key)
    if hit is not None and hit[0] is guard:
        return hit[1]
    conditions = _conditions(table, keys)
    if guard is not None:
        holders: dict[str, Value] = {
            p.name: sa.bindparam(f"g_{p.name}", type_=_DOUBLE if p.name in reals else _BIGINT)
            for p in _guard_params(guard)
        }
        conditions.append(where(guard, table, holders))
    values: dict[str, Any] = {}
    for s in sets:
        name = f"s_{s.column}"
        if isinstance(s, Bump):
            addend: Any = (
                as_double(sa.bindparam(name, type_=_DOUBLE))
                if s.real
                else sa.bindparam(name, type_=_BIGINT)
            )
            values[s.column] = table.c[s.column] + addend
        else:
            values[s.column] = sa.bindparam(name, type_=table.c[s.column].type)
    statement = sa.update(table).where(sa.and_(*conditions)).values(**values)
    if returning:
        statement = statement.returning(*table.c)
    if len(_STATEMENTS) < _CACHE_LIMIT:
        _STATEMENTS[key] = (guard, statement)
    return statement


def guarded_update(
    table: sa.Table,
    keys: Keys,
    guard: Guard | None,
    params: Mapping[str, Number],
    sets: Mapping[Set, Any],
    *,
    returning: bool = False,
) -> tuple[sa.Update, dict[str, Any]]:
    """The (cached) statement and its parameters.

    ``keys`` maps ``(column, "eq" | "gt")`` to the key's value, ``params`` are the guard's
    parameters (as ``compile.where`` takes them), ``sets`` maps each SET clause to its value.
    With ``returning`` the statement returns the updated row (``UPDATE … RETURNING``, where the
    dialect has it), sparing a read of the row afterwards.
    """
    reals = _reals(guard, params)
    statement = _update(table, tuple(keys), guard, reals, tuple(sets), returning)
    binds = _key_binds(keys)
    if guard is not None:
        for p in _guard_params(guard):
            value = params[p.name]
            binds[f"g_{p.name}"] = float(value) if p.name in reals else int(value)
    for s, value in sets.items():
        binds[f"s_{s.column}"] = float(value) if isinstance(s, Bump) and s.real else value
    return statement, binds


@lru_cache(maxsize=32)
def _locked(table: sa.Table, keys: tuple[tuple[str, str], ...]) -> sa.Select[Any]:
    return sa.select(table).where(*_conditions(table, keys)).with_for_update()


def locked_row(table: sa.Table, keys: Keys) -> tuple[sa.Select[Any], dict[str, Any]]:
    """``SELECT * FROM table WHERE keys FOR UPDATE`` (cached) and its parameters."""
    return _locked(table, tuple(keys)), _key_binds(keys)


@lru_cache(maxsize=32)
def _touch(table: sa.Table, keys: tuple[tuple[str, str], ...]) -> sa.Update:
    return sa.update(table).where(*_conditions(table, keys)).values(updated_at=table.c.updated_at)


def touch(table: sa.Table, keys: Keys) -> tuple[sa.Update, dict[str, Any]]:
    """The no-op ``UPDATE … SET updated_at = updated_at WHERE keys`` that locks the row."""
    return _touch(table, tuple(keys)), _key_binds(keys)


#: Whether the namespace has an active claim, as a locking (shared) read that never waits:
#: binds ``k_namespace`` and ``k_now``. It takes the claim row after the cluster row, the
#: reverse of every claim write, so waiting here could close a cycle (decision 16); a row that
#: another write holds is a claim that exists, and the admission runs again.
CLAIM_NOW: Final = (
    sa.select(claims.c.id)
    .where(
        claims.c.active_namespace == sa.bindparam("k_namespace"),
        claims.c.expires_at > sa.bindparam("k_now"),
    )
    .with_for_update(read=True, nowait=True)
)


@lru_cache(maxsize=8)
def insert(table: sa.Table) -> sa.Insert:
    """``INSERT INTO table`` taking its values as parameters at execution."""
    return sa.insert(table)


__all__ = [
    "CLAIM_NOW",
    "Assign",
    "Bump",
    "Keys",
    "charge_sets",
    "credit_sets",
    "guarded_update",
    "insert",
    "locked_row",
    "touch",
]
