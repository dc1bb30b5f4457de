"""RotationPolicy: defaults (spec §2.1), validation with field paths, resolve (spec §2.2)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from fleetgate.domain.rotation.constants import (
    BUFFER,
    DRAIN_FALLBACK,
    FAILURE_PAUSE_FLOOR,
    SHORT_REQUEUE,
)
from fleetgate.domain.rotation.labelselector import LabelSelector, SelectorRequirement
from fleetgate.domain.rotation.policy import (
    DEFAULT_REQUIRED_KEYS,
    MatchNodeRequirements,
    PolicyError,
    PrePull,
    RotationPolicy,
    Surge,
)
from fleetgate.domain.rotation.windows import MaintenanceWindow

M = timedelta(minutes=1)
H = timedelta(hours=1)
WED_SAT = MaintenanceWindow("Asia/Tokyo", ("Wed", "Sat"), "02:00", "06:00")
V1 = RotationPolicy(name="v1", maintenance_windows=(WED_SAT,))


def with_surge(**changes: object) -> RotationPolicy:
    """V1 with some surge fields changed."""
    return replace(V1, surge=replace(V1.surge, **changes))


def test_defaults_are_spec_2_1() -> None:
    surge = Surge()
    assert (V1.age_threshold, V1.min_rotation_chances) == (None, 2)
    assert V1.node_pool_selector == LabelSelector()
    assert (surge.max_unavailable, surge.ready_timeout, surge.cooldown_after) == (1, 15 * M, 10 * M)
    assert (surge.failure_pause, surge.retry_backoff) == (None, 30 * M)
    assert (surge.drain_estimate, surge.provisioning_estimate) == (None, None)
    assert surge.match_node_requirements == MatchNodeRequirements(DEFAULT_REQUIRED_KEYS, ())
    assert DEFAULT_REQUIRED_KEYS == (
        "topology.kubernetes.io/zone",
        "kubernetes.io/arch",
        "karpenter.sh/capacity-type",
    )
    assert not surge.forceful_fallback.enabled and not V1.pre_pull.enabled


def test_buffer_is_pinned_to_four_short_requeues() -> None:
    assert BUFFER == 4 * SHORT_REQUEUE == 2 * M


def test_valid_policy_has_no_errors() -> None:
    assert V1.validate() == []
    assert with_surge(cooldown_after=timedelta(0)).validate() == []  # 0 allowed (ADR-0004)


@pytest.mark.parametrize(
    ("policy", "error"),
    [
        (with_surge(failure_pause=timedelta(0)), "spec.surge.failurePause: must be greater than 0"),
        (with_surge(ready_timeout=timedelta(0)), "spec.surge.readyTimeout: must be greater than 0"),
        (with_surge(retry_backoff=-M), "spec.surge.retryBackoff: must be greater than 0"),
        (
            with_surge(drain_estimate=timedelta(0)),
            "spec.surge.drainEstimate: must be greater than 0",
        ),
        (
            with_surge(provisioning_estimate=-M),
            "spec.surge.provisioningEstimate: must be greater than 0",
        ),
        (
            with_surge(cooldown_after=-M),
            "spec.surge.cooldownAfter: must not be negative (0 is allowed)",
        ),
        (
            with_surge(max_unavailable=0),
            "spec.surge.maxUnavailable: must be 1 (rotation is serial per NodePool)",
        ),
        (
            with_surge(max_unavailable=2),
            "spec.surge.maxUnavailable: must be 1 (rotation is serial per NodePool)",
        ),
        (replace(V1, min_rotation_chances=0), "spec.minRotationChances: must be at least 1"),
        (
            replace(V1, age_threshold=timedelta(0)),
            'spec.ageThreshold: must be greater than 0 (or "auto")',
        ),
        (
            replace(V1, maintenance_windows=()),
            "spec.maintenanceWindows: must have at least one entry",
        ),
        (
            replace(V1, pre_pull=PrePull(enabled=True)),
            "spec.prePull.enabled: must be false in v1alpha1",
        ),
        (
            replace(V1, node_pool_selector=None),
            "spec.nodePoolSelector: is required ({} selects every NodePool)",
        ),
        (
            replace(
                V1,
                node_pool_selector=LabelSelector(
                    match_expressions=(SelectorRequirement("a", "In"),)
                ),
            ),
            "spec.nodePoolSelector.matchExpressions[0].values: must not be empty for operator In",
        ),
    ],
)
def test_each_validation_rule_names_its_field(policy: RotationPolicy, error: str) -> None:
    assert policy.validate() == [error]


def test_validation_reports_every_error_at_once() -> None:
    broken = replace(
        V1,
        min_rotation_chances=0,
        maintenance_windows=(MaintenanceWindow("Nowhere/Land", ("Wed",), "02:00", "06:00"),),
        surge=replace(V1.surge, failure_pause=timedelta(0), ready_timeout=-M),
    )
    assert broken.validate() == [
        "spec.minRotationChances: must be at least 1",
        "spec.maintenanceWindows[0].timezone: unknown time zone 'Nowhere/Land'",
        "spec.surge.readyTimeout: must be greater than 0",
        "spec.surge.failurePause: must be greater than 0",
    ]
    with pytest.raises(PolicyError) as caught:
        broken.resolve(H)
    assert len(caught.value.errors) == 4


@pytest.mark.parametrize(
    ("cooldown", "explicit", "expected"),
    [
        (10 * M, None, FAILURE_PAUSE_FLOOR),
        (M, None, 10 * M),  # lowering cooldownAfter never shortens the failure pause
        (timedelta(0), None, 10 * M),
        (30 * M, None, 30 * M),
        (30 * M, 3 * M, 3 * M),  # explicit wins
    ],
)
def test_failure_pause_resolves_to_max_of_floor_and_cooldown(cooldown, explicit, expected) -> None:
    resolved = with_surge(cooldown_after=cooldown, failure_pause=explicit).resolve(H)
    assert resolved.failure_pause == expected


def test_resolve_with_tgp_set() -> None:
    r = V1.resolve(24 * H)
    assert (r.tgp, r.tgp_was_unset) == (24 * H, False)
    assert r.drain_bound == 24 * H + BUFFER
    assert (r.shape.period, r.shape.shortest, r.shape.gap) == (96 * H, 4 * H, 68 * H)
    assert r.lead_time_base == 2 * 96 * H + 15 * M + BUFFER  # tGP excluded on purpose


def test_resolve_with_tgp_unset_uses_the_fallback_plus_buffer() -> None:
    r = V1.resolve(None)
    assert (r.tgp, r.tgp_was_unset) == (DRAIN_FALLBACK, True)
    # Spec §12.1, safer reading: the same bound the derivation uses (the reference drops Buffer).
    assert r.drain_bound == DRAIN_FALLBACK + BUFFER == V1.resolve(DRAIN_FALLBACK).drain_bound


def test_lead_time_uses_the_claims_own_tgp() -> None:
    r = V1.resolve(24 * H)
    assert r.lead_time_for(2 * H) == r.lead_time_base + 2 * H
    assert r.lead_time_for(None) == r.lead_time_base + DRAIN_FALLBACK


def test_resolved_view_exposes_policy_values() -> None:
    policy = replace(
        V1,
        age_threshold=100 * H,
        min_rotation_chances=3,
        surge=replace(
            V1.surge,
            match_node_requirements=MatchNodeRequirements(required=(), preferred=("a",)),
        ),
    )
    r = policy.resolve(H)
    assert (r.k, r.override, r.ready_timeout, r.cooldown_after, r.retry_backoff) == (
        3,
        100 * H,
        15 * M,
        10 * M,
        30 * M,
    )
    assert (r.max_unavailable, r.forceful_fallback) == (1, False)
    assert (r.required_keys, r.preferred_keys) == (DEFAULT_REQUIRED_KEYS, ("a",))
    rules = r.selection
    assert (rules.lead_time_base, rules.retry_backoff, rules.override) == (
        r.lead_time_base,
        30 * M,
        100 * H,
    )


def test_derive_through_the_policy_is_v1() -> None:
    r = V1.resolve(H).derive(timedelta(days=14), node_count=0)
    assert (r.t_rot, r.age_threshold, r.guaranteed_chances, r.capacity) == (
        H + 17 * M,
        142 * H + 43 * M,
        2,
        10,
    )
    assert r.findings == ()


def test_derive_inputs_carry_every_policy_value() -> None:
    policy = with_surge(drain_estimate=20 * M, provisioning_estimate=3 * M, cooldown_after=5 * M)
    inputs = policy.resolve(None).derive_inputs(timedelta(days=14), node_count=7)
    assert (inputs.tgp, inputs.tgp_was_unset, inputs.node_count) == (H, True, 7)
    assert (inputs.period, inputs.window_len, inputs.idle_gap) == (96 * H, 4 * H, 68 * H)
    assert (inputs.drain_estimate, inputs.provisioning_estimate, inputs.cooldown) == (
        20 * M,
        3 * M,
        5 * M,
    )


def test_resolved_estimates_match_the_derivation() -> None:
    unset = V1.resolve(24 * H)
    assert (unset.drain_estimate, unset.provisioning_estimate) == (10 * M, 5 * M)
    clamped = with_surge(drain_estimate=2 * H, provisioning_estimate=20 * M).resolve(H)
    assert (clamped.drain_estimate, clamped.provisioning_estimate) == (H, 15 * M)
    derived = clamped.derive(timedelta(days=14))
    assert (derived.drain_estimate, derived.provisioning_estimate) == (H, 15 * M)
