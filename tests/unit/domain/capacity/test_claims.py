"""Claim rules: validation, effective expiry, and the cluster accounting of every transition."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given

from fleetgate.domain.capacity.accounting import share, transition, unclaimed_share
from fleetgate.domain.capacity.claims import (
    MAX_EXPIRES_IN_SECONDS,
    Claim,
    ClaimEnforcement,
    ClaimRefusal,
    ClaimRequest,
    ClaimState,
    ClaimUpdate,
    Created,
    RefusalReason,
    Updated,
    claim_charge,
    due_for_expiry,
    enforcement_of,
    expires_in_seconds,
    plan_create,
    plan_release,
    plan_update,
)
from fleetgate.domain.capacity.denials import Stage
from fleetgate.domain.capacity.dimensions import Resources
from fleetgate.domain.capacity.guards import CLAIM_GUARD
from fleetgate.domain.capacity.model import ClusterState
from tests.strategies import claim_accounts, small_resources

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def cluster(total: Resources, claimed: Resources, unclaimed: Resources) -> ClusterState:
    return ClusterState(total=total, claimed=claimed, unclaimed_used=unclaimed, updated_at=NOW)


def claim(
    limit: Resources,
    used: Resources,
    *,
    expires_in: float = 3600,
    state: ClaimState = ClaimState.ACTIVE,
) -> Claim:
    return Claim(
        id="c1",
        namespace="ci-1",
        limit=limit,
        used=used,
        state=state,
        expires_at=NOW + timedelta(seconds=expires_in),
        created_at=NOW - timedelta(hours=1),
        updated_at=NOW - timedelta(hours=1),
    )


def cpus(n: int) -> Resources:
    return Resources(n, 0, 0)


# --- validation -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "at least 1"),
        (-5, "at least 1"),
        (1.5, "integer"),
        (True, "integer"),
        ("60", "integer"),
        (MAX_EXPIRES_IN_SECONDS + 1, "at most"),
    ],
)
def test_a_bad_expiry_is_refused_naming_the_field(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=f"expires_in_seconds: .*{message}"):
        ClaimRequest("ci-1", cpus(1), value)  # type: ignore[arg-type]


def test_a_bad_namespace_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="namespace: 'CI_1'"):
        ClaimRequest("CI_1", cpus(1), 60)


def test_negative_limits_are_refused_by_the_resources_value() -> None:
    with pytest.raises(ValueError, match="memory_mb: must not be negative"):
        ClaimRequest("ci-1", Resources(1, -1, 0), 60)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "fields: name at least one of"),
        ({"limit_cpus": -1}, "limit_cpus: must not be negative"),
        ({"limit_disk_gb": False}, "limit_disk_gb: must be an integer"),
        ({"limit_memory_mb": 2.0}, "limit_memory_mb: must be an integer"),
        ({"expires_in_seconds": 0}, "expires_in_seconds: must be at least 1"),
    ],
)
def test_a_bad_update_is_refused_naming_the_field(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ClaimUpdate(**kwargs)  # type: ignore[arg-type]


def test_the_field_mask_is_the_fields_given() -> None:
    update = ClaimUpdate(limit_cpus=0, expires_in_seconds=60)
    assert update.fields == {"limit_cpus", "expires_in_seconds"}
    assert update.limit_after(Resources(4, 512, 10)) == Resources(0, 512, 10)


# --- effective expiry -------------------------------------------------------------------------


def test_expiry_is_effective_at_expires_at_before_any_sweep() -> None:
    c = claim(cpus(4), cpus(0), expires_in=10)
    assert c.is_active(NOW) and c.coverage(NOW) is ClaimState.ACTIVE
    at_expiry = NOW + timedelta(seconds=10)
    assert not c.is_active(at_expiry)
    assert c.is_due(at_expiry)
    assert c.coverage(at_expiry) is ClaimState.EXPIRED
    assert due_for_expiry([c], at_expiry) == [c]
    assert due_for_expiry([c], NOW) == []


def test_a_swept_claim_is_never_due_again() -> None:
    c = claim(cpus(4), cpus(0), expires_in=-10, state=ClaimState.EXPIRED)
    assert not c.is_due(NOW) and c.coverage(NOW) is ClaimState.EXPIRED


def test_expires_in_seconds_counts_down_and_stops_at_zero() -> None:
    c = claim(cpus(1), cpus(0), expires_in=90.5)
    assert expires_in_seconds(c, NOW) == 91
    assert expires_in_seconds(c, NOW + timedelta(hours=1)) == 0


# --- create -----------------------------------------------------------------------------------


def test_create_migrates_the_namespaces_usage_golden_vector() -> None:
    # Capacity spec 9.1: total 100, unclaimed 80 (40 of it ci-1's), a claim of 40 for ci-1.
    row = cluster(cpus(100), cpus(0), cpus(80))
    made = plan_create(ClaimRequest("ci-1", cpus(40), 3600), row, cpus(40), NOW)
    assert isinstance(made, Created)
    assert made.cluster.claimed == cpus(40)
    assert made.cluster.unclaimed_used == cpus(40)
    assert made.used == cpus(40)
    assert made.expires_at == NOW + timedelta(hours=1)
    assert not made.cluster.clamped


def test_create_of_capacity_the_namespace_already_holds_is_not_refused() -> None:
    # The reference's first guard (claimed + limit <= total − unclaimed_used) refused this:
    # the cluster is full, but all of it is ci-1's own usage.
    row = cluster(cpus(100), cpus(0), cpus(100))
    made = plan_create(ClaimRequest("ci-1", cpus(100), 60), row, cpus(100), NOW)
    assert isinstance(made, Created)
    assert made.cluster.claimed == cpus(100) and made.cluster.unclaimed_used == cpus(0)


def test_create_refuses_with_the_dimension_detail_of_spec_4_1() -> None:
    row = cluster(Resources(100, 1000, 50), Resources(30, 0, 0), Resources(50, 100, 5))
    request = ClaimRequest("ci-1", Resources(40, 100, 5), 60)
    refused = plan_create(request, row, Resources(10, 0, 0), NOW)
    assert isinstance(refused, ClaimRefusal)
    assert refused.reason is RefusalReason.CAPACITY
    assert refused.denial is not None and refused.denial.stage is Stage.CLUSTER
    by_dim = {d.dimension: d for d in refused.denial.dimensions}
    cpu = by_dim["cpus"]
    # limit = total − claimed; used = unclaimed − migrated; requested = the new limit.
    assert (cpu.limit, cpu.used, cpu.requested, cpu.exceeded) == (70.0, 40.0, 40.0, True)
    assert not by_dim["memory_mb"].exceeded and not by_dim["disk_gb"].exceeded
    assert refused.denial.exceeded == {"cpus"}
    assert "cpus (limit 70, used 40, requested 40)" in refused.message


def test_create_below_existing_usage_keeps_the_excess_as_overage() -> None:
    row = cluster(cpus(100), cpus(0), cpus(60))
    made = plan_create(ClaimRequest("ci-1", cpus(10), 60), row, cpus(25), NOW)
    assert isinstance(made, Created)
    assert made.used == cpus(25)
    assert made.cluster.claimed == cpus(10)
    # 35 of other namespaces + 15 of ci-1's overage: the cluster row still sees all 60 used.
    assert made.cluster.unclaimed_used == cpus(50)
    assert made.cluster.raised == frozenset()


def test_a_drifted_cluster_row_is_floored_and_flagged() -> None:
    row = cluster(cpus(100), cpus(0), cpus(5))
    made = plan_create(ClaimRequest("ci-1", cpus(40), 60), row, cpus(20), NOW)
    assert isinstance(made, Created)
    assert made.cluster.unclaimed_used == cpus(0) and made.cluster.clamped


def test_a_zero_sized_claim_is_legal() -> None:
    made = plan_create(
        ClaimRequest("ci-1", Resources(), 60), cluster(cpus(1), cpus(1), cpus(0)), Resources(), NOW
    )
    assert isinstance(made, Created) and made.cluster.claimed == cpus(1)


# --- update -----------------------------------------------------------------------------------


def test_grow_is_an_admission_with_nothing_migrated() -> None:
    row = cluster(cpus(100), cpus(40), cpus(40))
    current = claim(cpus(40), cpus(40))
    grown = plan_update(current, ClaimUpdate(limit_cpus=60), row, NOW)
    assert isinstance(grown, Updated)
    assert grown.limit == cpus(60)
    assert grown.cluster is not None and grown.cluster.claimed == cpus(60)
    refused = plan_update(current, ClaimUpdate(limit_cpus=61), row, NOW)
    assert isinstance(refused, ClaimRefusal) and refused.reason is RefusalReason.CAPACITY
    assert refused.denial is not None
    cpu = next(d for d in refused.denial.dimensions if d.dimension == "cpus")
    # requested is the grow delta, not the new limit.
    assert (cpu.limit, cpu.used, cpu.requested, cpu.exceeded) == (60.0, 40.0, 21.0, True)


def test_grow_absorbs_overage_so_the_committed_sum_rises_only_by_the_rest() -> None:
    # A claim of 10 using 25 already commits 25 (15 of it as overage on the unclaimed side);
    # growing it to 30 commits 5 more, not 20, so a full-looking cluster of 30 still admits it.
    row = cluster(cpus(30), cpus(10), cpus(15))
    grown = plan_update(claim(cpus(10), cpus(25)), ClaimUpdate(limit_cpus=30), row, NOW)
    assert isinstance(grown, Updated) and grown.cluster is not None
    assert (grown.cluster.claimed, grown.cluster.unclaimed_used) == (cpus(30), cpus(0))
    refused = plan_update(claim(cpus(10), cpus(25)), ClaimUpdate(limit_cpus=31), row, NOW)
    assert isinstance(refused, ClaimRefusal) and refused.denial is not None
    cpu = refused.denial.dimensions[0]
    assert (cpu.limit, cpu.used, cpu.requested, cpu.exceeded) == (20.0, 0.0, 21.0, True)


def test_shrink_goes_down_to_usage_and_no_further() -> None:
    row = cluster(cpus(100), cpus(40), cpus(0))
    current = claim(cpus(40), cpus(12))
    to_usage = plan_update(current, ClaimUpdate(limit_cpus=12), row, NOW)
    assert isinstance(to_usage, Updated)
    assert to_usage.cluster is not None and to_usage.cluster.claimed == cpus(12)
    below = plan_update(current, ClaimUpdate(limit_cpus=11), row, NOW)
    assert isinstance(below, ClaimRefusal) and below.reason is RefusalReason.BELOW_USAGE
    assert below.denial is not None and below.denial.stage is Stage.CLAIM
    (dim,) = below.denial.dimensions
    assert (dim.dimension, dim.limit, dim.used, dim.requested, dim.exceeded) == (
        "cpus",
        11.0,
        12.0,
        0.0,
        True,
    )


def test_shrink_to_zero_and_back() -> None:
    row = cluster(Resources(100, 100, 100), Resources(10, 10, 10), Resources())
    current = claim(Resources(10, 10, 10), Resources())
    zero = plan_update(
        current, ClaimUpdate(limit_cpus=0, limit_memory_mb=0, limit_disk_gb=0), row, NOW
    )
    assert isinstance(zero, Updated) and zero.cluster is not None
    assert zero.limit == Resources() and zero.cluster.claimed == Resources()
    emptied = cluster(row.total, zero.cluster.claimed, zero.cluster.unclaimed_used)
    back = plan_update(
        claim(Resources(), Resources()),
        ClaimUpdate(limit_cpus=10, limit_memory_mb=10, limit_disk_gb=10),
        emptied,
        NOW,
    )
    assert isinstance(back, Updated) and back.cluster is not None
    assert back.cluster.claimed == Resources(10, 10, 10)


def test_a_mixed_grow_and_shrink_guards_only_the_growing_dimension() -> None:
    # Memory is already over the total (a node left); growing cpus must not be refused for it.
    row = cluster(Resources(100, 50, 10), Resources(10, 40, 0), Resources(0, 30, 0))
    updated = plan_update(
        claim(Resources(10, 40, 0), Resources(0, 0, 0)),
        ClaimUpdate(limit_cpus=20, limit_memory_mb=20),
        row,
        NOW,
    )
    assert isinstance(updated, Updated) and updated.cluster is not None
    assert updated.cluster.claimed == Resources(20, 20, 0)
    assert updated.cluster.raised == {"cpus"}


def test_re_dating_changes_only_the_expiry_and_may_shorten_it() -> None:
    current = claim(cpus(4), cpus(1), expires_in=7200)
    updated = plan_update(current, ClaimUpdate(expires_in_seconds=60), None, NOW)
    assert isinstance(updated, Updated)
    assert updated.expires_at == NOW + timedelta(seconds=60)
    assert updated.limit == cpus(4) and updated.cluster is None


def test_an_expired_claim_is_not_active_for_updates_even_before_the_sweep() -> None:
    current = claim(cpus(4), cpus(0), expires_in=30)
    later = NOW + timedelta(seconds=30)
    refused = plan_update(current, ClaimUpdate(expires_in_seconds=3600), None, later)
    assert isinstance(refused, ClaimRefusal) and refused.reason is RefusalReason.NOT_ACTIVE
    swept = claim(cpus(4), cpus(0), expires_in=-30, state=ClaimState.EXPIRED)
    assert isinstance(plan_update(swept, ClaimUpdate(limit_cpus=1), None, NOW), ClaimRefusal)


def test_growing_without_a_cluster_row_is_no_cluster_capacity_but_shrinking_is_fine() -> None:
    current = claim(cpus(4), cpus(0))
    grow = plan_update(current, ClaimUpdate(limit_cpus=5), None, NOW)
    assert isinstance(grow, ClaimRefusal)
    assert grow.reason is RefusalReason.NO_CLUSTER_CAPACITY
    shrink = plan_update(current, ClaimUpdate(limit_cpus=3), None, NOW)
    assert isinstance(shrink, Updated) and shrink.limit == cpus(3)


# --- release (expiry, delete) -----------------------------------------------------------------


def test_release_returns_limits_and_usage_to_the_unclaimed_pool() -> None:
    row = cluster(cpus(100), cpus(40), cpus(20))
    after = plan_release(claim(cpus(40), cpus(30)), row)
    assert after.claimed == cpus(0)
    assert after.unclaimed_used == cpus(50)
    assert after.raised == frozenset() and not after.clamped


def test_release_of_an_over_limit_claim_moves_only_the_part_not_already_unclaimed() -> None:
    # Limit 10, used 25: 15 is overage already counted unclaimed; only 10 moves.
    row = cluster(cpus(100), cpus(10), cpus(15))
    after = plan_release(claim(cpus(10), cpus(25)), row)
    assert after.claimed == cpus(0) and after.unclaimed_used == cpus(25)


# --- properties -------------------------------------------------------------------------------


@given(claim_accounts())
def test_create_then_release_restores_the_cluster_row(
    account: tuple[ClusterState, Resources, Resources],
) -> None:
    row, limit, migrated = account
    made = plan_create(ClaimRequest("ci-1", limit, 60), row, migrated, NOW)
    if isinstance(made, ClaimRefusal):
        return
    after = cluster(row.total, made.cluster.claimed, made.cluster.unclaimed_used)
    back = plan_release(claim(limit, migrated), after)
    assert back.claimed == row.claimed
    assert back.unclaimed_used == row.unclaimed_used


@given(claim_accounts())
def test_the_guard_admits_exactly_when_every_raised_dimension_still_fits(
    account: tuple[ClusterState, Resources, Resources],
) -> None:
    row, limit, migrated = account
    made = plan_create(ClaimRequest("ci-1", limit, 60), row, migrated, NOW)
    change = transition(row, unclaimed_share(migrated), share(limit, migrated, active=True))
    fits = all(
        change.claimed.get(d) + change.unclaimed_used.get(d) <= row.total.get(d)
        for d in change.raised
    )
    assert isinstance(made, Created) == fits
    if isinstance(made, ClaimRefusal):
        assert made.denial is not None
        for d in made.denial.dimensions:
            # exceeded is exactly "used + requested > limit" on a raised dimension
            raised = d.dimension in change.raised
            assert d.exceeded == (raised and d.used + d.requested > d.limit)


@given(small_resources(), small_resources(), small_resources())
def test_an_update_never_changes_the_claims_usage(
    limit: Resources, used: Resources, new_limit: Resources
) -> None:
    row = cluster(Resources(10**6, 10**6, 10**6), limit, used.minus_floored(limit))
    update = ClaimUpdate(
        limit_cpus=new_limit.cpus,
        limit_memory_mb=new_limit.memory_mb,
        limit_disk_gb=new_limit.disk_gb,
    )
    outcome = plan_update(claim(limit, used), update, row, NOW)
    below = any(
        new_limit.get(d) < limit.get(d) and used.get(d) > new_limit.get(d)
        for d in ("cpus", "memory_mb", "disk_gb")
    )
    assert isinstance(outcome, ClaimRefusal) == below
    if isinstance(outcome, Updated) and outcome.cluster is not None:
        # the row still equals the recomputation: the claim's share under its new limit
        expected = share(new_limit, used, active=True)
        assert outcome.cluster.claimed == expected.claimed
        assert outcome.cluster.unclaimed_used == expected.unclaimed_used


# --- claim enforcement and the claim-charge decision --------------------------------------------


def test_hard_enforcement_charges_under_the_claim_guard() -> None:
    rule = claim_charge(ClaimEnforcement.HARD, enforce=True)
    assert rule.guard is CLAIM_GUARD and rule.enforce and not rule.reports_over_limit


def test_an_unenforced_write_under_hard_enforcement_charges_past_the_guard() -> None:
    rule = claim_charge(ClaimEnforcement.HARD, enforce=False)
    assert rule.guard is CLAIM_GUARD and not rule.enforce


@pytest.mark.parametrize("enforce", [True, False])
def test_advisory_enforcement_always_charges_and_reports_the_overrun(enforce: bool) -> None:
    rule = claim_charge(ClaimEnforcement.ADVISORY, enforce=enforce)
    assert rule.guard is None and rule.enforce and rule.reports_over_limit


@pytest.mark.parametrize("value", ["hard", ClaimEnforcement.HARD])
def test_enforcement_is_read_from_its_setting(value: object) -> None:
    assert enforcement_of(value) is ClaimEnforcement.HARD


@pytest.mark.parametrize("value", ["Hard", "soft", None, 1])
def test_an_unknown_enforcement_is_refused_naming_the_setting(value: object) -> None:
    with pytest.raises(ValueError, match=r"claims\.enforcement: must be 'advisory' or 'hard'"):
        enforcement_of(value)
