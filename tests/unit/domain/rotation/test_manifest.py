"""Manifests: both API groups, strict unknown fields, every error at once with its path."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fleetgate.domain.rotation.labelselector import LabelSelector, SelectorRequirement
from fleetgate.domain.rotation.manifest import policy_from_manifest, read_manifest
from fleetgate.domain.rotation.policy import DEFAULT_REQUIRED_KEYS, PolicyError
from fleetgate.domain.rotation.windows import Exclusion, MaintenanceWindow

M = timedelta(minutes=1)


def manifest(**spec: Any) -> dict[str, Any]:
    """A minimal valid manifest with ``spec`` fields replaced."""
    body: dict[str, Any] = {
        "nodePoolSelector": {},
        "maintenanceWindows": [
            {"timezone": "Asia/Tokyo", "days": ["Wed", "Sat"], "start": "02:00", "end": "06:00"}
        ],
    }
    body.update(spec)
    return {
        "apiVersion": "fleetgate.io/v1alpha1",
        "kind": "RotationPolicy",
        "metadata": {"name": "weekend"},
        "spec": body,
    }


def errors_of(document: Any) -> tuple[str, ...]:
    """The errors ``policy_from_manifest`` raises for ``document``."""
    with pytest.raises(PolicyError) as caught:
        policy_from_manifest(document)
    return caught.value.errors


def test_full_manifest_reads_every_field() -> None:
    document = manifest(
        nodePoolSelector={
            "matchLabels": {"team": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}],
        },
        ageThreshold="200h",
        minRotationChances=3,
        exclusions=[{"start": "2024-12-24T00:00:00Z", "end": "2024-12-27T00:00:00+09:00"}],
        surge={
            "maxUnavailable": 1,
            "readyTimeout": "20m",
            "cooldownAfter": "0s",
            "failurePause": "30m",
            "retryBackoff": "1h",
            "drainEstimate": "15m",
            "provisioningEstimate": "4m",
            "matchNodeRequirements": {"required": ["kubernetes.io/arch"], "preferred": ["zone"]},
            "forcefulFallback": {"enabled": True},
        },
        prePull={"enabled": False},
    )
    policy = policy_from_manifest(document)
    assert policy.name == "weekend"
    assert policy.node_pool_selector == LabelSelector(
        {"team": "web"}, (SelectorRequirement("tier", "In", ("a", "b")),)
    )
    assert (policy.age_threshold, policy.min_rotation_chances) == (timedelta(hours=200), 3)
    assert policy.maintenance_windows == (
        MaintenanceWindow("Asia/Tokyo", ("Wed", "Sat"), "02:00", "06:00"),
    )
    assert policy.exclusions == (
        Exclusion(datetime(2024, 12, 24, tzinfo=UTC), datetime(2024, 12, 26, 15, tzinfo=UTC)),
    )
    s = policy.surge
    assert (s.ready_timeout, s.cooldown_after, s.failure_pause, s.retry_backoff) == (
        20 * M,
        timedelta(0),
        30 * M,
        60 * M,
    )
    assert (s.drain_estimate, s.provisioning_estimate) == (15 * M, 4 * M)
    assert s.match_node_requirements.required == ("kubernetes.io/arch",)
    assert s.match_node_requirements.preferred == ("zone",)
    assert s.forceful_fallback.enabled


def test_reference_api_group_is_accepted_unchanged() -> None:
    document = manifest()
    document["apiVersion"] = "noderotation.io/v1alpha1"
    document["metadata"] |= {"uid": "1", "resourceVersion": "9", "labels": {"a": "b"}}
    document["status"] = {"conditions": [], "matchedNodePools": ["default"]}
    policy = policy_from_manifest(document)
    assert policy.api_version == "noderotation.io/v1alpha1"
    assert policy.surge.ready_timeout == 15 * M  # defaults applied


def test_auto_and_defaults() -> None:
    policy = policy_from_manifest(manifest(ageThreshold="auto"))
    assert policy.age_threshold is None and policy.min_rotation_chances == 2


def test_explicit_empty_required_is_defaulted() -> None:
    policy = policy_from_manifest(manifest(surge={"matchNodeRequirements": {"required": []}}))
    assert policy.surge.match_node_requirements.required == DEFAULT_REQUIRED_KEYS


def test_days_as_written_reach_the_policy() -> None:
    document = manifest()
    document["spec"]["maintenanceWindows"][0]["days"] = [" wed", "SAT"]
    assert policy_from_manifest(document).maintenance_windows[0].days == (" wed", "SAT")


@pytest.mark.parametrize(
    ("mutate", "error"),
    [
        (lambda d: d.update(extra=1), "extra: unknown field"),
        (lambda d: d["metadata"].update(colour="red"), "metadata.colour: unknown field"),
        (lambda d: d["spec"].update(windows=[]), "spec.windows: unknown field"),
        (
            lambda d: d["spec"].update(surge={"readyTimout": "1m"}),
            "spec.surge.readyTimout: unknown field",
        ),
        (
            lambda d: d["spec"]["maintenanceWindows"][0].update(tz="UTC"),
            "spec.maintenanceWindows[0].tz: unknown field",
        ),
        (
            lambda d: d["spec"].update(surge={"matchNodeRequirements": {"optional": []}}),
            "spec.surge.matchNodeRequirements.optional: unknown field",
        ),
        (
            lambda d: d["spec"].update(surge={"forcefulFallback": {"on": True}}),
            "spec.surge.forcefulFallback.on: unknown field",
        ),
        (
            lambda d: d["spec"].update(nodePoolSelector={"labels": {}}),
            "spec.nodePoolSelector.labels: unknown field",
        ),
        (
            lambda d: d["spec"].update(
                exclusions=[
                    {"start": "2024-01-01T00:00:00Z", "end": "2024-01-02T00:00:00Z", "why": "x"}
                ]
            ),
            "spec.exclusions[0].why: unknown field",
        ),
    ],
)
def test_unknown_fields_are_named(mutate, error: str) -> None:
    document = copy.deepcopy(manifest())
    mutate(document)
    assert error in errors_of(document)


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (
            {"apiVersion": "v1"},
            "apiVersion: must be one of fleetgate.io/v1alpha1, noderotation.io/v1alpha1, got 'v1'",
        ),
        ({"kind": "NodePool"}, "kind: must be RotationPolicy, got 'NodePool'"),
    ],
)
def test_api_version_and_kind(change: dict[str, str], error: str) -> None:
    assert errors_of(manifest() | change) == (error,)


def test_missing_required_fields() -> None:
    assert errors_of({"kind": "RotationPolicy"}) == (
        "apiVersion: is required",
        "spec: is required",
    )


def test_not_a_mapping() -> None:
    assert errors_of(["a"])[0] == "manifest: must be a mapping, got a list"


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        (
            {"surge": {"readyTimeout": 15}},
            'spec.surge.readyTimeout: must be a duration string such as "15m", got the number 15',
        ),
        ({"surge": {"cooldownAfter": "ten"}}, "spec.surge.cooldownAfter: invalid duration 'ten'"),
        ({"minRotationChances": "2"}, "spec.minRotationChances: must be an integer, got str '2'"),
        (
            {"minRotationChances": True},
            "spec.minRotationChances: must be an integer, got a boolean",
        ),
        (
            {"surge": {"maxUnavailable": 1.5}},
            "spec.surge.maxUnavailable: must be an integer, got the number 1.5",
        ),
        ({"ageThreshold": "soon"}, 'spec.ageThreshold: must be "auto" or a duration'),
        (
            {"ageThreshold": 5},
            'spec.ageThreshold: must be "auto" or a duration string, got the number 5',
        ),
        (
            {"prePull": {"enabled": "no"}},
            "spec.prePull.enabled: must be true or false, got str 'no'",
        ),
        (
            {"rotateDrifted": {"enabled": "yes"}},
            "spec.rotateDrifted.enabled: must be true or false, got str 'yes'",
        ),
        (
            {"maintenanceWindows": "daily"},
            "spec.maintenanceWindows: must be a list, got str 'daily'",
        ),
        ({"surge": []}, "spec.surge: must be a mapping, got a list"),
        (
            {"exclusions": [{"start": "2024-12-24", "end": "2024-12-25T00:00:00Z"}]},
            "spec.exclusions[0].start: must be an RFC3339 instant such as "
            "2024-12-24T00:00:00Z, got '2024-12-24'",
        ),
        (
            {"exclusions": [{"start": datetime(2024, 12, 24), "end": "2024-12-25T00:00:00Z"}]},
            "spec.exclusions[0].start: must carry a UTC offset",
        ),
        (
            {"exclusions": [{"start": "2024-12-25T00:00:00Z", "end": "2024-12-24T00:00:00Z"}]},
            "spec.exclusions[0].end: must be after start",
        ),
        ({"surge": {"failurePause": "0s"}}, "spec.surge.failurePause: must be greater than 0"),
    ],
)
def test_type_and_value_errors_name_the_field(spec: dict[str, Any], error: str) -> None:
    assert any(e.startswith(error) for e in errors_of(manifest(**spec))), errors_of(
        manifest(**spec)
    )


def test_every_error_at_once_and_none_twice() -> None:
    document = manifest(
        surge={"readyTimeout": "x", "failurePause": "0s", "bogus": 1},
        maintenanceWindows=[{"timezone": "UTC", "days": "Mon", "start": "02:00", "end": "02:00"}],
        exclusions=[
            {"start": "bad", "end": "2024-12-25T00:00:00Z"},
            {"start": "2024-12-25T00:00:00Z", "end": "2024-12-24T00:00:00Z"},
        ],
    )
    errors = errors_of(document)
    paths = [e.partition(": ")[0] for e in errors]
    assert sorted(paths) == sorted(
        [
            "spec.maintenanceWindows[0].days",
            "spec.exclusions[0].start",
            "spec.exclusions[1].end",
            "spec.surge.bogus",
            "spec.surge.readyTimeout",
            "spec.surge.failurePause",
            "spec.maintenanceWindows[0].end",
        ]
    )


def test_window_entry_fields_are_required() -> None:
    errors = errors_of(manifest(maintenanceWindows=[{"days": ["Mon"]}]))
    assert errors == (
        "spec.maintenanceWindows[0].timezone: is required",
        "spec.maintenanceWindows[0].start: is required",
        "spec.maintenanceWindows[0].end: is required",
    )


def test_read_manifest_does_not_validate() -> None:
    policy, errors = read_manifest(manifest(surge={"failurePause": "0s"}))
    assert errors == [] and policy.surge.failure_pause == timedelta(0)


def test_rotate_drifted_is_off_unless_the_policy_opts_in() -> None:
    # Karpenter replaces Drifted claims itself; a policy may still claim them for fleetgate.
    default = policy_from_manifest(manifest())
    assert not default.rotate_drifted
    assert not default.resolve(timedelta(hours=1)).selection.rotate_drifted
    opted = policy_from_manifest(manifest(rotateDrifted={"enabled": True}))
    assert opted.rotate_drifted and opted.resolve(timedelta(hours=1)).selection.rotate_drifted


def test_disruption_budgets_are_honoured_unless_the_policy_says_to_ignore_them() -> None:
    assert not policy_from_manifest(manifest()).ignore_disruption_budgets
    opted = policy_from_manifest(manifest(ignoreDisruptionBudgets={"enabled": True}))
    assert opted.ignore_disruption_budgets
    with pytest.raises(PolicyError, match=r"spec\.ignoreDisruptionBudgets\.enabled: must be"):
        policy_from_manifest(manifest(ignoreDisruptionBudgets={"enabled": "yes"}))
