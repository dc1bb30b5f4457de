"""Advisory overage: usage above a claim's limit, and how a charge or credit moves it."""

from __future__ import annotations

from hypothesis import given

from fleetgate.domain.capacity.dimensions import ALLOCATION, Resources
from fleetgate.domain.capacity.overage import overage, overage_decrease, overage_increase
from tests.strategies import small_resources


def test_overage_is_usage_above_the_limit() -> None:
    assert overage(Resources(10, 5, 0), Resources(8, 8, 0)) == Resources(2, 0, 0)


def test_a_charge_that_crosses_the_limit_adds_only_the_excess() -> None:
    # Spec 9.1 advisory fixture: limit 8, used 6, +4 -> 2 over.
    assert overage_increase(Resources(8, 9, 9), Resources(6, 0, 0), Resources(4, 1, 1)) == (
        Resources(2, 0, 0)
    )


def test_a_credit_gives_back_only_overage_that_existed() -> None:
    assert overage_decrease(Resources(8, 0, 0), Resources(10, 0, 0), Resources(4, 0, 0)) == (
        Resources(2, 0, 0)
    )


@given(small_resources(), small_resources(), small_resources())
def test_increase_then_decrease_returns_to_the_start(
    limit: Resources, used: Resources, x: Resources
) -> None:
    up = overage_increase(limit, used, x)
    down = overage_decrease(limit, used.plus(x), x)
    assert up == down
    assert all(0 <= up.get(d) <= x.get(d) for d in ALLOCATION)
