"""A PodDisruptionBudget's arithmetic, as the disruption controller and the Eviction API do it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleetgate.adapters.fakecluster.pdb import (
    ALWAYS_ALLOW,
    EVICTION_MAX_DELAY,
    DisruptionBudget,
    allowed_disruptions,
    desired_healthy,
    may_evict,
    next_retry,
)


@pytest.mark.parametrize(
    ("expected", "min_available", "max_unavailable", "desired"),
    [
        (5, 3, None, 3),
        (5, "50%", None, 3),  # 2.5 rounds up
        (5, None, 1, 4),
        (5, None, "25%", 3),  # 1.25 unavailable rounds up to 2
        (4, None, "100%", 0),
        (3, "100%", None, 3),
        (2, None, 5, 0),  # never below zero
    ],
)
def test_desired_healthy_rounds_percentages_up(
    expected: int, min_available: int | str | None, max_unavailable: int | str | None, desired: int
) -> None:
    assert desired_healthy(expected, min_available, max_unavailable) == desired


def test_disruptions_allowed_is_the_healthy_surplus_never_negative() -> None:
    assert allowed_disruptions(5, 5, None, 1) == 1
    assert allowed_disruptions(5, 4, None, 1) == 0
    assert allowed_disruptions(5, 2, 3, None) == 0


def test_an_unhealthy_pod_goes_only_while_the_budget_is_healthy_unless_always_allowed() -> None:
    # 3 expected, minAvailable 2: with 2 healthy the unhealthy third may go, with 1 it may not.
    assert may_evict(
        pod_healthy=False, expected=3, healthy=2, min_available=2, max_unavailable=None
    )
    assert not may_evict(
        pod_healthy=False, expected=3, healthy=1, min_available=2, max_unavailable=None
    )
    assert may_evict(
        pod_healthy=False,
        expected=3,
        healthy=1,
        min_available=2,
        max_unavailable=None,
        unhealthy_policy=ALWAYS_ALLOW,
    )
    # A healthy Pod needs a disruption to spare.
    assert not may_evict(
        pod_healthy=True, expected=3, healthy=2, min_available=2, max_unavailable=None
    )


@pytest.mark.parametrize(
    ("healthy", "goes"),
    [
        (0, False),  # nothing desired, nothing healthy: DisruptionsAllowed 0, a 429
        (1, True),  # one healthy Pod leaves a disruption to spend
    ],
)
def test_an_unhealthy_pod_with_nothing_desired_needs_a_disruption_to_spare(
    healthy: int, goes: bool
) -> None:
    # maxUnavailable 100%: DesiredHealthy is 0, so the IfHealthyBudget shortcut (which needs
    # DesiredHealthy > 0) does not apply and checkAndDecrement decides.
    assert (
        may_evict(
            pod_healthy=False,
            expected=2,
            healthy=healthy,
            min_available=None,
            max_unavailable="100%",
        )
        is goes
    )


def test_karpenters_retries_double_from_100ms_then_fall_every_10s() -> None:
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    ms = timedelta(milliseconds=1)
    # Retries at 100, 300, 700, 1500, 3100, 6300, 12700 ms (doubling), then every 10 s.
    assert next_retry(t0, t0) == t0 + 100 * ms
    assert next_retry(t0, t0 + 101 * ms) == t0 + 300 * ms
    assert next_retry(t0, t0 + 6300 * ms) == t0 + 6300 * ms
    assert next_retry(t0, t0 + 6301 * ms) == t0 + 12700 * ms
    assert next_retry(t0, t0 + 12701 * ms) == t0 + 22700 * ms
    assert next_retry(t0, t0 + timedelta(hours=1)) == t0 + 12700 * ms + 359 * EVICTION_MAX_DELAY


def test_a_budget_selects_by_namespace_and_labels() -> None:
    budget = DisruptionBudget("default", "web", {"app": "web"}, max_unavailable=0)
    assert budget.selects("default", {"app": "web", "x": "y"})
    assert not budget.selects("other", {"app": "web"})
    assert not budget.selects("default", {"app": "db"})
    assert not budget.lets_go(True, [True, True])
