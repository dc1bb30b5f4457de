"""A namespace's share of the cluster row, and moving the row between two shares."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given

from fleetgate.domain.capacity.accounting import (
    capacity_denial,
    share,
    transition,
    unclaimed_share,
)
from fleetgate.domain.capacity.dimensions import Resources
from fleetgate.domain.capacity.model import ClusterState
from tests.strategies import small_resources

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def row(total: Resources, claimed: Resources, unclaimed: Resources) -> ClusterState:
    return ClusterState(total, claimed, unclaimed, NOW)


def test_an_active_claim_holds_its_limit_and_its_overage() -> None:
    held = share(Resources(10, 100, 0), Resources(12, 50, 3), active=True)
    assert held.claimed == Resources(10, 100, 0)
    assert held.unclaimed_used == Resources(2, 0, 3)


def test_a_namespace_without_an_active_claim_holds_all_its_usage_unclaimed() -> None:
    held = share(Resources(10, 100, 0), Resources(12, 50, 3), active=False)
    assert held == unclaimed_share(Resources(12, 50, 3))
    assert held.claimed == Resources() and held.unclaimed_used == Resources(12, 50, 3)


def test_a_transition_reports_the_dimensions_it_raises() -> None:
    before = unclaimed_share(Resources(5, 5, 5))
    after = share(Resources(8, 5, 2), Resources(5, 5, 5), active=True)
    change = transition(row(Resources(50, 50, 50), Resources(), Resources(5, 5, 5)), before, after)
    # cpus: 5 -> 8 committed; memory: 5 -> 5; disk: 5 -> 2 + 3 overage = 5
    assert change.raised == {"cpus"}
    assert change.claimed == Resources(8, 5, 2) and change.unclaimed_used == Resources(0, 0, 3)


def test_a_counter_that_would_go_negative_is_floored_and_flagged() -> None:
    change = transition(
        row(Resources(9, 9, 9), Resources(1, 0, 0), Resources()),
        share(Resources(4, 0, 0), Resources(), active=True),
        unclaimed_share(Resources()),
    )
    assert change.claimed == Resources() and change.clamped


def test_the_denial_names_only_raised_dimensions_that_no_longer_fit() -> None:
    before_row = row(Resources(10, 10, 10), Resources(5, 9, 0), Resources(3, 3, 0))
    change = transition(
        before_row,
        unclaimed_share(Resources()),
        share(Resources(4, 0, 0), Resources(), active=True),
    )
    denial = capacity_denial(before_row, change, {"cpus": 4, "memory_mb": 0, "disk_gb": 0})
    assert denial is not None and denial.exceeded == {"cpus"}
    # memory is over the total already, but this transition does not raise it
    fits = transition(
        before_row,
        unclaimed_share(Resources()),
        share(Resources(2, 0, 0), Resources(), active=True),
    )
    assert capacity_denial(before_row, fits, {"cpus": 2, "memory_mb": 0, "disk_gb": 0}) is None


@given(small_resources(), small_resources(), small_resources(), small_resources())
def test_moving_there_and_back_restores_the_row(
    limit: Resources, used: Resources, claimed: Resources, others: Resources
) -> None:
    start = row(Resources(10**6, 10**6, 10**6), claimed, others.plus(used))
    there = transition(start, unclaimed_share(used), share(limit, used, active=True))
    middle = row(start.total, there.claimed, there.unclaimed_used)
    back = transition(middle, share(limit, used, active=True), unclaimed_share(used))
    assert (back.claimed, back.unclaimed_used) == (start.claimed, start.unclaimed_used)
    assert not there.clamped and not back.clamped
