"""When a release's credit is a plain subtraction: the guards of its one-statement form.

A release gives back what its placement was charged, floored at zero, a clamp reported, an
advisory claim's shrinking overage handed to the cluster row (``overage.overage_decrease``) and
the node's demand credited with what remains of the placement's charge (``demand.remaining``).
When the row holds at least the credit (and a claim is within its limit, so its overage is zero
before and after), every one of those reduces to ``counter - credit``: no floor, no clamp, no
overage, the demand credit whole. These guards say exactly that, so the SQL ledger can make the
credit in one guarded ``UPDATE`` and read nothing while it holds the row; a row they refuse (a
counter that drifted below the placement's size, an advisory claim past its limit) is credited
the general way, from the row read under its lock.
"""

from __future__ import annotations

from typing import Final

from fleetgate.domain.capacity.dimensions import ALLOCATION
from fleetgate.domain.capacity.guards import Column, Guard, Measure, Param

#: The demand credit's parameter (a float): what remains of the placement's decayed charge.
DEMAND_CREDIT: Final = Param("demand_credit", real=True)


def _covers(prefix: str) -> tuple[Measure, ...]:
    """``credit_d <= {prefix}d`` per dimension: the counter holds the whole credit."""
    return tuple(
        Measure(
            dimension=d,
            limit=Column(f"{prefix}{d}"),
            used=Param(d),
            requested=Param(d),
            charged=False,
        )
        for d in ALLOCATION
    )


def _within_limit() -> tuple[Measure, ...]:
    """``used_d <= limit_d`` per dimension: a claim with no overage (none after a credit either)."""
    return tuple(
        Measure(
            dimension=f"{d} within limit",
            limit=Column(f"limit_{d}"),
            used=Column(f"used_{d}"),
            requested=Param(d),
            charged=False,
        )
        for d in ALLOCATION
    )


#: A claim row: it holds the credit and is within its limit (no overage to hand to the cluster).
CLAIM_CREDIT: Final = Guard("claim credit", (), (*_covers("used_"), *_within_limit()))
#: The cluster row's unclaimed side holds the credit.
CLUSTER_CREDIT: Final = Guard("cluster credit", (), _covers("unclaimed_used_"))
#: A node row holds the credit and at least the demand credit.
NODE_CREDIT: Final = Guard(
    "node credit",
    (),
    (
        *_covers("used_"),
        Measure(
            dimension="demand",
            limit=Column("expected_demand"),
            used=DEMAND_CREDIT,
            requested=DEMAND_CREDIT,
            charged=False,
        ),
    ),
)
