"""NodePool disruption budgets, counted as Karpenter v1.14 counts them (nodepool.go, helpers.go)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleetgate.domain.rotation.budgets import (
    DEFAULT_BUDGETS,
    Budget,
    BudgetError,
    allowed,
    blocked_intervals,
    budgets_failing_closed,
    budgets_from_spec,
    next_change,
    remaining,
)

T = datetime(2024, 1, 1, tzinfo=UTC)  # a Monday, 00:00
H = timedelta(hours=1)
UNLIMITED = 2**31 - 1


def budget(**spec: object) -> Budget:
    (one,) = budgets_from_spec([spec])
    return one


@pytest.mark.parametrize(
    ("nodes", "count", "allows"),
    [
        ("10%", 10, 1),
        ("5%", 10, 1),  # rounded up, as Karpenter (and a PDB's maxUnavailable) rounds
        ("19%", 10, 2),
        ("10%", 0, 0),
        ("100%", 7, 7),
        ("0%", 50, 0),
        ("0", 50, 0),
        ("3", 2, 3),
    ],
)
def test_a_percentage_is_rounded_up_and_a_count_is_taken_as_it_is(
    nodes: str, count: int, allows: int
) -> None:
    assert allowed([budget(nodes=nodes)], T, count) == allows


def test_a_scheduled_budget_is_active_from_each_hit_for_its_duration() -> None:
    nightly = budget(nodes="0", schedule="0 22 * * *", duration="8h")
    start = T.replace(hour=22)
    assert not nightly.is_active(start - timedelta(microseconds=1))
    assert nightly.is_active(start)  # the hit itself: now - duration < hit <= now
    assert nightly.is_active(start + 8 * H - timedelta(seconds=1))
    assert not nightly.is_active(start + 8 * H)  # a hit exactly one duration ago is over
    assert allowed([nightly], start + H, 10) == 0
    assert allowed([nightly], T.replace(hour=12), 10) == UNLIMITED


def test_the_smallest_value_of_the_budgets_that_apply_to_a_reason_wins() -> None:
    budgets = [
        budget(nodes="20%"),
        budget(nodes="0", reasons=["Drifted"]),
        budget(nodes="1", reasons=["Empty", "Underutilized"]),
    ]
    assert allowed(budgets, T, 10, "Drifted") == 0
    assert allowed(budgets, T, 10, "Empty") == 1
    assert allowed(budgets, T, 10) == 2  # only those for every reason
    # An explicit empty reasons list applies to no reason (Go's non-nil empty slice).
    assert allowed([budget(nodes="0", reasons=[])], T, 10, "Drifted") == UNLIMITED
    assert allowed([], T, 10) == UNLIMITED


def test_disruptions_under_way_use_the_budget_up() -> None:
    assert remaining(DEFAULT_BUDGETS, T, 10, 0) == 1
    assert remaining(DEFAULT_BUDGETS, T, 10, 1) == 0
    assert remaining(DEFAULT_BUDGETS, T, 10, 3) == 0  # never below zero


def test_absent_budgets_are_the_crd_default_and_an_empty_list_is_none() -> None:
    assert budgets_from_spec(None) == DEFAULT_BUDGETS == (Budget(nodes="10%"),)
    assert budgets_from_spec([]) == ()


def test_next_change_follows_a_schedule_and_chains_overlapping_hits() -> None:
    nightly = budget(nodes="0", schedule="0 22 * * *", duration="8h")
    assert next_change([nightly], T.replace(hour=12)) == T.replace(hour=22)
    assert next_change([nightly], T.replace(hour=23)) == T + timedelta(days=1, hours=6)
    hourly = budget(nodes="0", schedule="@hourly", duration="2h")  # always active once begun
    assert next_change([hourly], T) is None
    assert next_change([budget(nodes="0")], T) is None


def test_blocked_intervals_are_the_zero_budgets_for_every_reason_only() -> None:
    budgets = [
        budget(nodes="0", schedule="0 22 * * *", duration="8h"),
        budget(nodes="0", schedule="0 4 * * *", duration="4h"),  # overlaps: merged
        budget(nodes="0", reasons=["Drifted"]),  # not for every reason
        budget(nodes="10%"),  # never zero while the pool has a node
    ]
    spans = blocked_intervals(budgets, T, T + timedelta(days=2))
    assert spans == [
        (T, T + 8 * H),  # the hit at 22:00 the day before still covers the start
        (T + 22 * H, T + 32 * H),
        (T + 46 * H, T + 48 * H),
    ]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"nodes": "101%"}, r"budgets\[0\]\.nodes: must be a count or a percentage"),
        ({"nodes": "ten"}, r"budgets\[0\]\.nodes"),
        ({"schedule": "@daily"}, r"budgets\[0\]: 'schedule' must be set with 'duration'"),
        ({"duration": "1h"}, r"'schedule' must be set with 'duration'"),
        ({"schedule": "@daily", "duration": "1d"}, r"budgets\[0\]\.duration: must be hours"),
        ({"schedule": "@daily", "duration": "30s"}, r"budgets\[0\]\.duration"),
        ({"schedule": "@every 1h", "duration": "1h"}, r"budgets\[0\]\.schedule: must be a"),
        ({"schedule": "@HOURLY", "duration": "1h"}, r"budgets\[0\]\.schedule: must be a"),
        ({"schedule": "0 0 * *", "duration": "1h"}, r"budgets\[0\]\.schedule: must be a"),
        # Go's $ is the end of the text: a trailing newline does not pass the CRD's patterns.
        ({"nodes": "10\n"}, r"budgets\[0\]\.nodes: must be a count"),
        ({"schedule": "@daily", "duration": "8h\n"}, r"budgets\[0\]\.duration: must be hours"),
        ({"schedule": "@daily", "duration": "\u0668h"}, r"budgets\[0\]\.duration"),  # Arabic 8
        ({"nodes": "\u0663"}, r"budgets\[0\]\.nodes"),
        ({"reasons": ["Expired"]}, r"budgets\[0\]\.reasons: 'Expired' is not one of"),
        ({"nodes": "1", "when": "now"}, r"budgets\[0\]\.when: unknown field"),
    ],
)
def test_a_budget_the_crd_refuses_is_refused_with_the_field_named(
    spec: dict[str, object], message: str
) -> None:
    with pytest.raises(BudgetError, match=message):
        budgets_from_spec([spec])


def test_durations_take_karpenters_forms() -> None:
    assert budget(schedule="@daily", duration="1h30m").duration == 90 * timedelta(minutes=1)
    assert budget(schedule="@daily", duration="8h0m0s").duration == 8 * H
    assert budget(schedule="@daily", duration="45m0s").duration == timedelta(minutes=45)


def test_unlimited_by_default_stays_go_bounded() -> None:
    with pytest.raises(BudgetError, match=r"duration: '2562048h' is past Go's limit"):
        budgets_from_spec([{"schedule": "@daily", "duration": "2562048h"}])


# Schedules Karpenter's CRD admits (its pattern is anchored at one end per branch) but robfig
# cannot read: Karpenter fails closed on them, for every reason (issue 43, point 2).
UNREADABLE_SCHEDULES = [
    "\u00b9 * * * *",  # a superscript one
    "\u0663 * * * *",  # an Arabic-Indic three
    "@hourly2",
    "@daily @weekly",
    "0 0 * * * *",  # six fields
    "L * * * *",
]


@pytest.mark.parametrize("schedule", UNREADABLE_SCHEDULES)
def test_a_schedule_only_the_crd_admits_is_refused_by_name_where_a_file_is_read(
    schedule: str,
) -> None:
    with pytest.raises(BudgetError, match=r"budgets\[0\]\.schedule: .*fails closed|no disrupt"):
        budgets_from_spec([{"nodes": "5", "schedule": schedule, "duration": "1h"}])


@pytest.mark.parametrize("schedule", UNREADABLE_SCHEDULES)
def test_a_live_schedule_karpenter_cannot_read_stops_every_disruption(schedule: str) -> None:
    spec = [
        {"nodes": "5", "schedule": schedule, "duration": "1h", "reasons": ["Drifted"]},
        {"nodes": "50%"},
    ]
    budgets, problems = budgets_failing_closed(spec)
    # Karpenter's MustGetAllowedDisruptions answers 0 on any budget error, whatever the reason.
    for reason in (None, "Drifted", "Empty", "Underutilized"):
        assert allowed(budgets, T, 10, reason) == 0
    (problem,) = problems
    assert problem.startswith("spec.disruption.budgets[0].schedule")
    assert "no disruption" in problem


def test_what_robfig_reads_the_crd_admits_with_go_anchoring() -> None:
    # "@daily" then a newline: the CRD's first branch is anchored at the start only, and robfig
    # trims the text, so Karpenter reads it as @daily.
    assert budget(nodes="0", schedule="@daily\n", duration="1h").is_active(T)
    budgets, problems = budgets_failing_closed(
        [{"nodes": "0", "schedule": "@daily\t", "duration": "1h"}]
    )
    assert problems == () and budgets[0].is_active(T + timedelta(minutes=30))


def test_a_schedule_that_never_fires_keeps_its_budget_active_for_good() -> None:
    # robfig's Next gives the zero time, which is not after now: Karpenter's IsActive is true.
    never = budget(nodes="0", schedule="0 0 30 2 *", duration="1h")
    assert all(never.is_active(T + k * timedelta(days=37)) for k in range(20))
    assert allowed([never], T, 10) == 0
    assert next_change([never], T) is None
    assert blocked_intervals([never], T, T + timedelta(days=3)) == [(T, T + timedelta(days=3))]


@pytest.mark.parametrize(
    ("nodes", "allows"),
    [
        ("2147483647", 2147483647),
        ("2147483648", -2147483648),  # intstr.FromInt keeps the low 32 bits
        ("4294967295", -1),
        ("4294967296", 0),
        ("4294967297", 1),
        ("9223372036854775807", -1),
        ("00000000003", 3),
    ],
)
def test_a_count_past_int32_wraps_as_karpenter_reads_it(nodes: str, allows: int) -> None:
    assert budget(nodes=nodes).value(10) == allows
    assert allowed([budget(nodes=nodes)], T, 10) == allows
    assert remaining([budget(nodes=nodes)], T, 10, 0) == max(allows, 0)


def test_a_wrapped_negative_count_blocks_like_zero() -> None:
    spans = blocked_intervals([budget(nodes="2147483648")], T, T + H)
    assert spans == [(T, T + H)]


def test_a_count_past_int64_fails_closed_while_active_only() -> None:
    nodes = "9223372036854775808"
    with pytest.raises(BudgetError, match=r"budgets\[0\]\.nodes: .* past int64"):
        budgets_from_spec([{"nodes": nodes}])
    spec = [{"nodes": nodes, "schedule": "0 22 * * *", "duration": "2h", "reasons": ["Empty"]}]
    budgets, problems = budgets_failing_closed(spec)
    assert len(problems) == 1
    assert allowed(budgets, T.replace(hour=23), 10, "Drifted") == 0  # active: every reason
    assert allowed(budgets, T.replace(hour=12), 10, "Drifted") == UNLIMITED  # inactive: none
