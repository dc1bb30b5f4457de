"""Small SQL building blocks shared by the ledger modules: typed parameters and DOUBLE casts.

MariaDB reads a literal ``0.1`` as an exact DECIMAL, so ``0.1 + 0.2 <= 0.3`` is true there and
false in Python. aiomysql happens to send floats with an exponent (``1e-1``, a DOUBLE literal);
the explicit cast makes that a property of the SQL rather than of one driver's escaping, so all
three databases do IEEE double arithmetic whatever the driver, as the domain's evaluator does.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement


class as_double(FunctionElement[float]):
    """``CAST(x AS DOUBLE)`` on every dialect (SQLAlchemy skips DOUBLE casts on MySQL)."""

    type = sa.Double()
    name = "as_double"
    inherit_cache = True


@compiles(as_double)
def _as_double(element: as_double, compiler: SQLCompiler, **kw: Any) -> str:
    # The dialect's own name for an IEEE double (DOUBLE PRECISION, DOUBLE...), rendered here
    # since SQLAlchemy's CAST leaves a DOUBLE cast out on MySQL.
    double = compiler.dialect.type_compiler_instance.process(_DOUBLE)
    return f"CAST({compiler.process(element.clauses, **kw)} AS {double})"


# One instance of each parameter type: SQLAlchemy memoizes a type's cache key per instance, so a
# fresh BigInteger() per parameter would recompute it on every statement (a hot-path cost).
_BIGINT: sa.BigInteger = sa.BigInteger()
_DOUBLE: sa.Double[float] = sa.Double()


def integer(value: int) -> sa.BindParameter[int]:
    """A BIGINT parameter (asyncpg would otherwise bind a large count as int4)."""
    return sa.bindparam(None, value, type_=_BIGINT, unique=True)


def real(value: float) -> as_double:
    """A DOUBLE parameter."""
    return as_double(sa.bindparam(None, float(value), type_=_DOUBLE, unique=True))


def epoch(at: datetime) -> float:
    """Epoch seconds of an aware datetime (how every timestamp is stored)."""
    if at.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware")
    return at.timestamp()


def instant(seconds: float) -> datetime:
    """The UTC datetime of stored epoch seconds."""
    return datetime.fromtimestamp(seconds, UTC)


def maybe_instant(seconds: float | None) -> datetime | None:
    """``instant`` for a nullable column."""
    return None if seconds is None else instant(seconds)
