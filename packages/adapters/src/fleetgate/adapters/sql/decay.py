"""The demand decay rule compiled to SQL, so a reconcile pass sums it in one GROUP BY.

``fleetgate.domain.capacity.demand.remaining`` is the rule: ``demand × max(0, 1 − age/decay)``
with a negative age counted as zero. Evaluating it in Python meant reading every placement young
enough to still carry demand, row by row (half of them in the benchmark's busy fleet). The
expression here repeats the domain's arithmetic operation for operation in IEEE doubles (every
constant cast to DOUBLE, so MariaDB does not switch to DECIMAL), built from the same parameters
(the pass's ``now`` and the decay window); each row's term therefore equals
``remaining(demand, now − admitted_at, decay)`` exactly, which tests/adapters/sql/test_decay.py
checks on every backend. Only the sum differs from the domain's ``math.fsum``: the database adds
the terms in its own order, so a node's total can differ from it in the last bits.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.sql.elements import ColumnElement

from fleetgate.adapters.sql.schema import placements
from fleetgate.adapters.sql.sqltypes import real


def _at_least_zero(value: ColumnElement[float]) -> ColumnElement[float]:
    """``max(0.0, value)`` as Python computes it (a zero or negative value becomes 0.0)."""
    return sa.case((value > real(0.0), value), else_=real(0.0))


def remaining_demand(now: float, decay_seconds: float) -> ColumnElement[float]:
    """What is left at ``now`` (epoch seconds) of the demand charge of each ``placements`` row.

    A charge that is not positive carries nothing (the pass never counted one), and a decay
    window of zero or less disables the estimate, as ``remaining`` does.
    """
    if decay_seconds <= 0:
        return real(0.0)
    age = _at_least_zero(real(now) - placements.c.admitted_at)
    left = _at_least_zero(real(1.0) - age / real(decay_seconds))
    return sa.case((placements.c.demand > real(0.0), placements.c.demand * left), else_=real(0.0))


def decayed_sum(now: float, decay_seconds: float) -> ColumnElement[float]:
    """``Σ remaining_demand`` over a group of placements (0.0 for a group with no charge)."""
    return sa.func.coalesce(sa.func.sum(remaining_demand(now, decay_seconds)), real(0.0))


__all__ = ["decayed_sum", "remaining_demand"]
