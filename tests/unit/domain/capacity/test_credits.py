"""The credit guards: where they admit a row, the general (floored) credit is a subtraction."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from fleetgate.domain.capacity.credits import CLAIM_CREDIT, CLUSTER_CREDIT, NODE_CREDIT
from fleetgate.domain.capacity.dimensions import ALLOCATION, Resources
from fleetgate.domain.capacity.guards import evaluate
from fleetgate.domain.capacity.overage import overage_decrease
from tests.strategies import small_resources


def _row(prefix: str, amount: Resources) -> dict[str, object]:
    return {f"{prefix}{d}": amount.get(d) for d in ALLOCATION}


@given(small_resources(), small_resources(), small_resources())
def test_a_claim_the_guard_admits_is_credited_by_a_plain_subtraction(
    limit: Resources, used: Resources, credit: Resources
) -> None:
    row = {**_row("used_", used), **_row("limit_", limit)}
    admitted = evaluate(CLAIM_CREDIT, row, credit.as_dict()).passed
    holds = all(credit.get(d) <= used.get(d) <= limit.get(d) for d in ALLOCATION)
    assert admitted == holds
    if admitted:
        # No floor, no clamp, no overage handed to the cluster: what the release's general path
        # would compute from the row read under its lock.
        floored = used.minus_floored(credit)
        assert all(floored.get(d) == used.get(d) - credit.get(d) for d in ALLOCATION)
        assert overage_decrease(limit, used, credit).is_zero()


@given(small_resources(), small_resources())
def test_the_cluster_guard_admits_exactly_the_rows_holding_the_credit(
    unclaimed: Resources, credit: Resources
) -> None:
    admitted = evaluate(CLUSTER_CREDIT, _row("unclaimed_used_", unclaimed), credit.as_dict())
    assert admitted.passed == all(credit.get(d) <= unclaimed.get(d) for d in ALLOCATION)


@given(
    small_resources(),
    small_resources(),
    st.floats(min_value=0, max_value=10, allow_nan=False),
    st.floats(min_value=0, max_value=10, allow_nan=False),
)
def test_a_node_the_guard_admits_holds_the_credit_and_the_whole_demand_credit(
    used: Resources, credit: Resources, demand: float, demand_credit: float
) -> None:
    row = {**_row("used_", used), "expected_demand": demand}
    params = {**credit.as_dict(), "demand_credit": demand_credit}
    admitted = evaluate(NODE_CREDIT, row, params).passed
    holds = all(credit.get(d) <= used.get(d) for d in ALLOCATION) and demand_credit <= demand
    assert admitted == holds
    if admitted:
        # The general path's demand credit, min(credit, demand before), is the whole credit,
        # and the subtraction never goes below zero.
        assert min(demand_credit, demand) == demand_credit and demand - demand_credit >= 0
