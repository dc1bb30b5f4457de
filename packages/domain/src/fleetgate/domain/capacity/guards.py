"""The capacity guards, defined once as data.

A guard is a tuple of *measures* (one per dimension it bounds) and *flags* (boolean columns that
must be true). Each is an expression tree over the named columns of the row being charged and the
named parameters of the request. Two evaluators read the same tree: :func:`evaluate` here, in
Python, and the SQL ledger, which compiles it into the ``WHERE`` of its guarded ``UPDATE``. A
property test holds the two together on every backend.

Evaluation follows SQL's three-valued logic (``None`` is NULL) so that the Python answer is the
database's answer, including for nodes whose metrics are unknown.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from fleetgate.domain.capacity.dimensions import ALLOCATION

Number = int | float

# --- the expression language ------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """A column of the row being charged (``used_cpus``, ``cpu_load_1``...)."""

    name: str


@dataclass(frozen=True)
class Param:
    """A value of the request (``cpus``, ``target_load``...). ``real`` params are floats in SQL."""

    name: str
    real: bool = False


@dataclass(frozen=True)
class Const:
    """A literal number."""

    value: Number


@dataclass(frozen=True)
class Add:
    """``left + right``."""

    left: Expr
    right: Expr


@dataclass(frozen=True)
class Sub:
    """``left - right``."""

    left: Expr
    right: Expr


@dataclass(frozen=True)
class Mul:
    """``left * right``."""

    left: Expr
    right: Expr


@dataclass(frozen=True)
class Coalesce:
    """``COALESCE(expr, default)``: unknown counts as ``default``."""

    expr: Expr
    default: Expr


Expr = Column | Param | Const | Add | Sub | Mul | Coalesce


@dataclass(frozen=True)
class AtMost:
    """``left <= right`` (NULL when either side is NULL)."""

    left: Expr
    right: Expr


@dataclass(frozen=True)
class IsNull:
    """``expr IS NULL``."""

    expr: Expr


@dataclass(frozen=True)
class IsTrue:
    """A boolean column that must hold (``schedulable``)."""

    column: Column


@dataclass(frozen=True)
class AnyOf:
    """``a OR b OR ...`` with SQL's three-valued logic."""

    terms: tuple[Test, ...]


Test = AtMost | IsNull | IsTrue | AnyOf

# --- guards -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Measure:
    """One bounded dimension: ``limit``, ``used`` and ``requested`` as expressions.

    ``charged`` measures pass when ``used + requested <= limit``: the request is added before the
    comparison. The demand pseudo-dimension is not charged (phase-4a shape): it passes when the
    node's *existing* state fits, ``used <= limit``, and the request's charge is only reported.
    ``unless_null`` names a column that, when NULL, makes the measure pass and go unreported
    (a node that has not published ``cpu_schedulable`` is not demand-limited).
    ``parts`` are extra named figures reported beside the triple (what ``used`` is made of).
    """

    dimension: str
    limit: Expr
    used: Expr
    requested: Expr
    charged: bool = True
    unless_null: Column | None = None
    parts: tuple[tuple[str, Expr], ...] = ()

    def test(self) -> Test:
        """The predicate this measure contributes to the guard."""
        left = Add(self.used, self.requested) if self.charged else self.used
        fits = AtMost(left, self.limit)
        if self.unless_null is None:
            return fits
        return AnyOf((IsNull(self.unless_null), fits))


@dataclass(frozen=True)
class Flag:
    """A boolean column the row must have set (a cordoned node has ``schedulable`` false)."""

    name: str
    column: Column

    def test(self) -> Test:
        """The predicate this flag contributes to the guard."""
        return IsTrue(self.column)


@dataclass(frozen=True)
class Guard:
    """Everything a row must satisfy to take a charge: the conjunction of its flags and measures."""

    stage: str
    flags: tuple[Flag, ...]
    measures: tuple[Measure, ...]

    def tests(self) -> tuple[tuple[str, Test], ...]:
        """Each named predicate, flags first, in a fixed order."""
        return tuple((f.name, f.test()) for f in self.flags) + tuple(
            (m.dimension, m.test()) for m in self.measures
        )


@dataclass(frozen=True)
class Verdict:
    """The outcome of evaluating a guard: which named predicates did not hold."""

    failed: tuple[str, ...]

    @property
    def passed(self) -> bool:
        """True when every predicate held."""
        return not self.failed


# --- evaluation ---------------------------------------------------------------------------------

Row = Mapping[str, object]
Params = Mapping[str, Number]


def value_of(expr: Expr, row: Row, params: Params) -> Number | None:
    """Evaluate an arithmetic expression; ``None`` stands for SQL NULL and propagates."""
    match expr:
        case Column(name):
            raw = row[name]
            if raw is None:
                return None
            if isinstance(raw, bool) or not isinstance(raw, int | float):
                raise TypeError(f"column {name}: expected a number, got {raw!r}")
            return raw
        case Param(name, real):
            v = params[name]
            return float(v) if real else v
        case Const(v):
            return v
        case Coalesce(inner, default):
            got = value_of(inner, row, params)
            return value_of(default, row, params) if got is None else got
        case Add(a, b) | Sub(a, b) | Mul(a, b):
            left, right = value_of(a, row, params), value_of(b, row, params)
            if left is None or right is None:
                return None
            if isinstance(expr, Add):
                return left + right
            if isinstance(expr, Sub):
                return left - right
            return left * right
    raise TypeError(f"not an expression: {expr!r}")  # pragma: no cover - exhaustive above


def truth_of(test: Test, row: Row, params: Params) -> bool | None:
    """Evaluate a predicate with SQL's three-valued logic (``None`` is UNKNOWN)."""
    match test:
        case AtMost(a, b):
            left, right = value_of(a, row, params), value_of(b, row, params)
            return None if left is None or right is None else left <= right
        case IsNull(inner):
            return value_of(inner, row, params) is None
        case IsTrue(Column(name)):
            raw = row[name]
            return None if raw is None else bool(raw)
        case AnyOf(terms):
            results = [truth_of(t, row, params) for t in terms]
            if any(r is True for r in results):
                return True
            return None if any(r is None for r in results) else False
    raise TypeError(f"not a predicate: {test!r}")  # pragma: no cover - exhaustive above


def evaluate(guard: Guard, row: Row, params: Params) -> Verdict:
    """Which of the guard's predicates fail for this row and request (UNKNOWN fails, like WHERE)."""
    return Verdict(tuple(name for name, t in guard.tests() if truth_of(t, row, params) is not True))


# --- the guards fleetgate uses ------------------------------------------------------------------

DEMAND: Final = "demand"
SCHEDULABLE: Final = "schedulable"

#: The demand clause, phase-4a shape: ``COALESCE(cpu_load_1, 0) + expected_demand <= target_load ×
#: cpu_schedulable``. Existing node state only: the request's charge is reported, never compared,
#: so an idle node admits every size (the reference's charged form refused 54 of 80 cells).
DEMAND_CLAUSE: Final = Measure(
    dimension=DEMAND,
    limit=Mul(Param("target_load", real=True), Column("cpu_schedulable")),
    used=Add(Coalesce(Column("cpu_load_1"), Const(0.0)), Column("expected_demand")),
    requested=Param("demand", real=True),
    charged=False,
    unless_null=Column("cpu_schedulable"),
    parts=(
        ("cpu_load_1", Coalesce(Column("cpu_load_1"), Const(0.0))),
        ("expected_demand", Column("expected_demand")),
    ),
)


def _allocation(used: str, limit: str) -> tuple[Measure, ...]:
    return tuple(
        Measure(
            dimension=d, limit=Column(f"{limit}{d}"), used=Column(f"{used}{d}"), requested=Param(d)
        )
        for d in ALLOCATION
    )


_NODE_FLAGS: Final = (Flag(SCHEDULABLE, Column("schedulable")),)
#: The node guard with the demand clause, and without it (both built once: an admission asks
#: for one of the two, and the SQL ledger caches statements by guard).
NODE_GUARD: Final = Guard("node", _NODE_FLAGS, (*_allocation("used_", "limit_"), DEMAND_CLAUSE))
NODE_GUARD_WAIVED: Final = Guard("node", _NODE_FLAGS, _allocation("used_", "limit_"))


def node_guard(target_load: float) -> Guard:
    """The node row's guard: schedulable, the three allocations, and the demand clause.

    The demand clause is dropped entirely when ``target_load <= 0``: that is both how an operator
    turns the spreader off and how the waiver pass asks for an admission without it.
    """
    return NODE_GUARD if target_load > 0 else NODE_GUARD_WAIVED


#: The unclaimed side of the cluster: ``unclaimed_used + x <= total − claimed`` per dimension.
CLUSTER_GUARD: Final = Guard(
    "cluster",
    (),
    tuple(
        Measure(
            dimension=d,
            limit=Sub(Column(f"total_{d}"), Column(f"claimed_{d}")),
            used=Column(f"unclaimed_used_{d}"),
            requested=Param(d),
        )
        for d in ALLOCATION
    ),
)

#: A namespace's active claim, when enforcement is hard: ``used + x <= limit`` per dimension.
CLAIM_GUARD: Final = Guard("claim", (), _allocation("used_", "limit_"))
