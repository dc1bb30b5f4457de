"""The sample fleet: pools governed by the given policies, feasible, with nodes falling due."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fleetgate.adapters import plugins
from fleetgate.adapters.clock import VirtualClock
from fleetgate.apps.policyfile import load_policies, load_policy
from fleetgate.apps.up import fleet
from fleetgate.domain.capacity.dimensions import Resources
from fleetgate.domain.rotation.governance import govern
from fleetgate.domain.rotation.policy import RotationPolicy
from fleetgate.domain.rotation.windows import MaintenanceWindow

EXAMPLES = Path(__file__).parents[3] / "examples"
T0 = datetime(2024, 1, 1, 2, 0, tzinfo=UTC)  # a Monday, 02:00 UTC


def test_the_default_policies_govern_one_pool_each_with_no_findings() -> None:
    policies = load_policies(fleet.DEFAULT_POLICIES)
    plans = fleet.plan_pools(policies, 6)
    assert [(p.name, p.nodes, p.policy.name) for p in plans] == [
        ("general", 3, "general"),
        ("batch", 3, "batch"),
    ]
    for plan in plans:
        gov = govern(plan.labels, policies, fleet.TGP)
        assert gov.governed and gov.winner == plan.policy.name
        assert gov.resolved is not None
        derivation = gov.resolved.derive(plan.expire_after, plan.nodes)
        assert derivation.findings == ()
    assert [p.expire_after for p in plans] == [timedelta(days=3), timedelta(days=5)]


@pytest.mark.parametrize(
    "example",
    ["tokyo-policy.yaml", "overnight-policy.yaml", "weekend-policy.yaml", "auto-mode-policy.yaml"],
)
def test_any_example_policy_governs_both_pools_feasibly(example: str) -> None:
    policy = load_policy(EXAMPLES / example)
    for plan in fleet.plan_pools([policy], 5):
        gov = govern(plan.labels, [policy], fleet.TGP)
        assert gov.governed, gov.detail
        assert gov.resolved is not None
        derivation = gov.resolved.derive(plan.expire_after, plan.nodes)
        assert not derivation.fatal and derivation.age_threshold > timedelta(0)


def test_nodes_are_shared_between_the_pools_the_first_taking_the_odd_one() -> None:
    policy = load_policies(fleet.DEFAULT_POLICIES)
    assert [p.nodes for p in fleet.plan_pools(policy, 7)] == [4, 3]
    assert [p.nodes for p in fleet.plan_pools(policy, 1)] == [1, 0]
    with pytest.raises(ValueError, match="policies"):
        fleet.plan_pools([], 3)


def test_expire_after_covers_twice_the_lead_time_in_whole_days() -> None:
    weekly = RotationPolicy(
        name="weekly",
        maintenance_windows=(MaintenanceWindow("UTC", ("Sun",), "01:00", "03:00"),),
    )
    # K = 2, P = 7d: lead time 14d 1h17m, twice that rounds up to 29 days.
    assert fleet.expire_after_for(weekly) == timedelta(days=29)
    assert fleet.expire_after_for(RotationPolicy(name="broken")) == fleet.MIN_EXPIRE_AFTER


def test_the_first_node_is_due_at_once_and_the_next_ones_in_steps() -> None:
    ages = fleet.node_ages(timedelta(hours=46), 3)
    assert ages[0] > timedelta(hours=46)
    assert ages[0] - ages[1] == ages[1] - ages[2] == fleet.DUE_EVERY
    young = fleet.node_ages(timedelta(hours=3), 3)  # A / n is shorter than DUE_EVERY
    assert young[0] - young[1] == timedelta(hours=1)


def test_virtual_time_starts_just_before_the_next_window_or_now_inside_one() -> None:
    policies = load_policies(fleet.DEFAULT_POLICIES)  # general: 10-16 and 22-04 UTC
    assert fleet.virtual_start(policies, T0) == T0  # 02:00 is inside 22:00-04:00
    six = T0.replace(hour=6)
    assert fleet.virtual_start(policies, six) == six.replace(hour=9, minute=45)
    assert fleet.virtual_start([], six) == six


def test_seeding_creates_ready_nodes_with_a_workload_and_the_pools_labels() -> None:
    clock = VirtualClock(T0)
    cluster = plugins.make_cluster(plugins.plugin_manager(allow={"fake"}), "fake", {}, clock)
    plans = fleet.plan_pools(load_policies(fleet.DEFAULT_POLICIES), 4)
    fleet.seed_cluster(cluster, plans, T0)
    assert sorted(cluster.pools) == ["batch", "general"]
    general = cluster.pools["general"]
    assert general.labels == {"fleetgate.io/rotation": "general"}
    assert general.node_allocatable["cpu"] == 8000
    claims = [c for c in cluster.claims.values() if c.pool == "general"]
    assert len(claims) == 2 and all(c.ready for c in claims)
    oldest = min(c.created_at for c in claims)
    assert T0 - oldest > timedelta(hours=46, minutes=43)  # due at once under A = 46h43m
    pods = [p for p in cluster.pods.values() if p.node_name in {c.name for c in claims}]
    assert all(p.requests["cpu"] == 6000 for p in pods) and len(pods) == 2


def test_the_claim_reserves_a_share_of_every_dimension() -> None:
    request = fleet.claim_request(Resources(100, 1000, 10))
    assert request.namespace == "ci" and request.limit == Resources(35, 350, 3)
    assert request.expires_in_seconds == 30 * 86400


def test_each_pool_provisions_and_drains_as_long_as_its_policy_estimates() -> None:
    policies = load_policies(fleet.DEFAULT_POLICIES)
    explicit = RotationPolicy(
        name="explicit",
        maintenance_windows=policies[0].maintenance_windows,
        surge=replace(policies[0].surge, provisioning_estimate=timedelta(minutes=7)),
    )
    plans = fleet.plan_pools([policies[0], explicit], 4)
    assert fleet.estimates_of(plans[0]) == (timedelta(minutes=5), timedelta(minutes=10))
    assert fleet.estimates_of(plans[1])[0] == timedelta(minutes=7)
    broken = replace(plans[0], policy=RotationPolicy(name="no-windows"))
    assert fleet.estimates_of(broken) == (timedelta(minutes=5), timedelta(minutes=10))
