"""Compile a domain guard into the WHERE clause of the guarded UPDATE.

The domain defines each guard once, as data (``fleetgate.domain.capacity.guards``). This module
is the SQL evaluator of that data; ``guards.evaluate`` is the Python one. Column names in the
guard are looked up on the table being updated, parameters are bound typed, and real-valued
parameters and constants are cast to DOUBLE so every backend does the same float arithmetic.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql.elements import ColumnElement

from fleetgate.adapters.sql.sqltypes import as_double, integer, real
from fleetgate.domain.capacity.guards import (
    Add,
    AnyOf,
    AtMost,
    Coalesce,
    Column,
    Const,
    Expr,
    Guard,
    IsNull,
    IsTrue,
    Mul,
    Param,
    Sub,
    Test,
)

Number = int | float
#: A request's value, or the named placeholder a prepared statement binds it to.
Value = Number | sa.BindParameter[Any]


def expression(expr: Expr, table: sa.Table, params: Mapping[str, Value]) -> ColumnElement[Any]:
    """The SQL form of an arithmetic expression over ``table``'s columns and ``params``."""
    match expr:
        case Column(name):
            return table.c[name]
        case Param(name, is_real):
            value = params[name]
            if isinstance(value, sa.BindParameter):  # a named placeholder (``prepared``)
                return as_double(value) if is_real or isinstance(value.type, sa.Double) else value
            return real(value) if is_real or isinstance(value, float) else integer(int(value))
        case Const(value):
            return real(value) if isinstance(value, float) else integer(value)
        case Coalesce(inner, default):
            return sa.func.coalesce(
                expression(inner, table, params), expression(default, table, params)
            )
        case Add(a, b):
            return expression(a, table, params) + expression(b, table, params)
        case Sub(a, b):
            return expression(a, table, params) - expression(b, table, params)
        case Mul(a, b):
            return expression(a, table, params) * expression(b, table, params)
    raise TypeError(f"not an expression: {expr!r}")  # pragma: no cover - exhaustive above


def predicate(test: Test, table: sa.Table, params: Mapping[str, Value]) -> ColumnElement[bool]:
    """The SQL form of one guard predicate."""
    match test:
        case AtMost(a, b):
            return expression(a, table, params) <= expression(b, table, params)
        case IsNull(inner):
            return expression(inner, table, params).is_(None)
        case IsTrue(Column(name)):
            return table.c[name].is_(sa.true())
        case AnyOf(terms):
            return sa.or_(*(predicate(t, table, params) for t in terms))
    raise TypeError(f"not a predicate: {test!r}")  # pragma: no cover - exhaustive above


def where(guard: Guard, table: sa.Table, params: Mapping[str, Value]) -> ColumnElement[bool]:
    """The conjunction of every predicate of ``guard``: the guarded UPDATE's WHERE."""
    return sa.and_(*(predicate(t, table, params) for _, t in guard.tests()))


__all__ = ["as_double", "expression", "predicate", "where"]
