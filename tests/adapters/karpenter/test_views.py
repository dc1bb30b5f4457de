"""Kubernetes JSON -> observation values."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fleetgate.adapters.karpenter import views
from fleetgate.domain.rotation.budgets import Budget
from fleetgate.domain.rotation.cluster import Requirement, Taint


def _claim(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "c1",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"karpenter.sh/nodepool": "p"},
            "annotations": {"a": "b"},
        },
        "spec": {
            "expireAfter": "336h",
            "terminationGracePeriod": "1h30m",
            "requirements": [{"key": "k", "operator": "In", "values": ["v"]}],
            **spec,
        },
        "status": {
            "nodeName": "n1",
            "allocatable": {"cpu": "3920m"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def test_claim_view_reads_every_field() -> None:
    view = views.claim_view(_claim())
    assert view.name == "c1"
    assert view.created_at == datetime(2026, 1, 1, tzinfo=UTC)
    assert view.expire_after == timedelta(hours=336)
    assert view.termination_grace_period == timedelta(hours=1, minutes=30)
    assert view.ready and view.node_name == "n1" and not view.deleting
    assert view.requirements == (Requirement("k", "In", ("v",)),)
    assert view.allocatable == {"cpu": 3920}
    assert view.annotations == {"a": "b"}


def test_never_is_no_expiry_and_absent_is_the_crd_default() -> None:
    # The v1 CRDs default expireAfter to 720h; a real API server fills it in, so an object
    # without it must not be read as Never (it would never be rotated, then force-expire).
    assert views.claim_view(_claim(expireAfter="Never")).expire_after is None
    raw = _claim()
    del raw["spec"]["expireAfter"], raw["spec"]["terminationGracePeriod"]
    view = views.claim_view(raw)
    assert view.expire_after == timedelta(hours=720) and view.termination_grace_period is None
    pool = {"metadata": {"name": "p"}, "spec": {"template": {"spec": {}}}}
    assert views.pool_observation(pool, [], [], [], []).expire_after == timedelta(hours=720)


def test_karpenter_disruption_conditions_are_read() -> None:
    raw = _claim()
    raw["status"]["conditions"] += [
        {"type": "DisruptionReason", "status": "True", "reason": "Underutilized"},
        {"type": "Drifted", "status": "True", "reason": "NodePoolDrifted"},
    ]
    view = views.claim_view(raw)
    assert view.disruption_reason == "Underutilized" and view.drifted
    assert view.selection_view.karpenter_disrupting and view.selection_view.drifted
    raw["status"]["conditions"][1:] = [
        {"type": "DisruptionReason", "status": "False", "reason": "Cleared"},
        {"type": "Drifted", "status": "Unknown", "reason": "Unknown"},
    ]
    view = views.claim_view(raw)
    assert view.disruption_reason is None and not view.drifted
    assert not views.claim_view(_claim()).selection_view.karpenter_disrupting


def test_node_taints_and_pod_start_time_are_read() -> None:
    node = views.node_view(
        {
            "metadata": {"name": "n1"},
            "spec": {"taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]},
        }
    )
    assert node.taints == (Taint("karpenter.sh/disrupted", "", "NoSchedule"),)
    raw = _pod({"containers": []})
    raw["status"]["startTime"] = "2026-01-01T00:00:00Z"
    assert views.pod_view(raw).started_at == datetime(2026, 1, 1, tzinfo=UTC)
    assert views.pod_view(_pod({"containers": []})).started_at is None


def test_static_and_not_ready_pools_and_node_counts_are_read() -> None:
    pool: dict[str, Any] = {
        "metadata": {"name": "p"},
        "spec": {"replicas": 3, "limits": {"nodes": "3"}, "template": {"spec": {}}},
        "status": {"nodes": 3, "conditions": [{"type": "Ready", "status": "False"}]},
    }
    obs = views.pool_observation(pool, [], [], [], [])
    assert obs.static and obs.replicas == 3 and not obs.ready
    assert obs.limits == {"nodes": 3000} and obs.resources == {"nodes": 3000}
    pool["status"] = {
        "resources": {"nodes": "2"},
        "nodes": 9,  # status.resources.nodes wins: it is what limits are checked against
        "conditions": [{"type": "Ready", "status": "True"}],
    }
    pool["spec"].pop("replicas")
    obs = views.pool_observation(pool, [], [], [], [])
    assert not obs.static and obs.ready and obs.resources == {"nodes": 2000}
    pool["spec"]["replicas"] = "three"
    with pytest.raises(ValueError, match=r"nodepool p: spec.replicas: 'three' is not a count"):
        views.pool_observation(pool, [], [], [], [])


@pytest.mark.parametrize("status", ["False", "Unknown", None])
def test_ready_only_when_exactly_true(status: str | None) -> None:
    raw = _claim()
    raw["status"]["conditions"] = [] if status is None else [{"type": "Ready", "status": status}]
    assert views.claim_view(raw).ready is False


def test_deletion_timestamp_marks_deleting() -> None:
    raw = _claim()
    raw["metadata"]["deletionTimestamp"] = "2026-01-02T03:04:05+00:00"
    assert views.claim_view(raw).deleting_at == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_bad_duration_names_object_and_field() -> None:
    with pytest.raises(ValueError, match=r"nodeclaim c1: spec.expireAfter: invalid duration"):
        views.claim_view(_claim(expireAfter="two weeks"))


def _pod(spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns", **meta},
        "spec": spec,
        "status": {"phase": "Running"},
    }


def _c(cpu: str, **extra: Any) -> dict[str, Any]:
    return {"name": "x", "resources": {"requests": {"cpu": cpu}}, **extra}


def test_effective_requests_sum_containers_and_take_the_init_peak() -> None:
    spec = {"containers": [_c("100m"), _c("200m")], "initContainers": [_c("500m")]}
    assert views.effective_requests(spec, "pod") == {"cpu": 500}
    spec = {"containers": [_c("400m"), _c("200m")], "initContainers": [_c("500m")]}
    assert views.effective_requests(spec, "pod") == {"cpu": 600}


def test_sidecars_run_beside_containers_and_later_init_containers() -> None:
    spec = {
        "initContainers": [_c("100m", restartPolicy="Always"), _c("450m")],
        "containers": [_c("200m")],
        "overhead": {"cpu": "10m"},
    }
    # init peak: 450m + the 100m sidecar = 550m; running: 200m + 100m = 300m; plus overhead.
    assert views.effective_requests(spec, "pod") == {"cpu": 560}


def test_pod_view_reads_owner_mirror_pinning_and_scheduling() -> None:
    raw = _pod(
        {
            "nodeName": "n1",
            "nodeSelector": {"kubernetes.io/hostname": "n1"},
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "kubernetes.io/hostname",
                                        "operator": "In",
                                        "values": ["n1", "n2"],
                                    }
                                ]
                            },
                            {
                                "matchExpressions": [
                                    {"key": "zone", "operator": "In", "values": ["a"]}
                                ]
                            },
                        ]
                    }
                }
            },
            "containers": [_c("1")],
        },
        ownerReferences=[
            {"kind": "ReplicaSet", "controller": False},
            {"kind": "DaemonSet", "controller": True},
        ],
        annotations={"kubernetes.io/config.mirror": "abc"},
    )
    raw["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "no"}
    ]
    view = views.pod_view(raw)
    assert view.owner_kind == "DaemonSet" and view.mirror
    assert view.node_selector == {"kubernetes.io/hostname": "n1"}
    assert view.required_hostnames == (("n1", "n2"), ())
    assert (view.unschedulable_reason, view.unschedulable_message) == ("Unschedulable", "no")
    assert view.requests == {"cpu": 1000}


def test_pod_without_scheduling_trouble_has_no_reason() -> None:
    view = views.pod_view(_pod({"containers": []}))
    assert view.unschedulable_reason is None and view.owner_kind is None and not view.mirror


def test_pool_observation_reads_template_limits_and_sorts_children() -> None:
    pool = {
        "metadata": {"name": "p", "resourceVersion": "42", "labels": {"team": "a"}},
        "spec": {
            "template": {
                "spec": {
                    "expireAfter": "720h",
                    "requirements": [
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
                    ],
                    "taints": [{"key": "gpu", "effect": "NoExecute"}],
                }
            },
            "limits": {"cpu": "100", "memory": "1000Gi"},
        },
        "status": {"resources": {"cpu": "8"}},
    }
    second = _claim()
    second["metadata"] = {**second["metadata"], "name": "a0"}
    obs = views.pool_observation(pool, [_claim(), second], [], [], [])
    assert obs.version == "42" and obs.labels == {"team": "a"}
    assert obs.expire_after == timedelta(hours=720) and obs.termination_grace_period is None
    assert obs.taints == (Taint("gpu", "", "NoExecute"),)
    assert obs.limits == {"cpu": 100_000, "memory": 1000 * 2**30 * 1000}
    assert obs.resources == {"cpu": 8000}
    assert [c.name for c in obs.claims] == ["a0", "c1"]


def test_the_nodepools_disruption_budgets_are_read_as_karpenter_reads_them() -> None:
    pool: dict[str, Any] = {
        "metadata": {"name": "p"},
        "spec": {"template": {"spec": {}}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    # Absent: the CRD's default (a real API server writes it in).
    assert views.pool_observation(pool, [], [], [], []).budgets == (Budget(nodes="10%"),)
    pool["spec"]["disruption"] = {
        "budgets": [
            {"nodes": "0", "reasons": ["Drifted"]},
            {"nodes": "20%", "schedule": "0 22 * * mon-fri", "duration": "8h"},
            # The CRD's pattern lets this cron through; Karpenter fails closed on it, and for
            # every reason (MustGetAllowedDisruptions answers 0 on any budget error).
            {"nodes": "5", "schedule": "61 * * * *", "duration": "1h", "reasons": ["Empty"]},
        ]
    }
    obs = views.pool_observation(pool, [], [], [], [])
    drift, nightly, broken = obs.budgets
    assert drift == Budget(nodes="0", reasons=("Drifted",))
    assert nightly.nodes == "20%" and nightly.duration == timedelta(hours=8)
    assert nightly.schedule is not None and nightly.schedule.weekdays == frozenset(range(1, 6))
    assert broken == Budget(nodes="0")
    (problem,) = obs.budget_problems
    assert problem.startswith("nodepool p: spec.disruption.budgets[2].schedule (minute): '61'")
    pool["spec"]["disruption"]["budgets"] = []
    assert views.pool_observation(pool, [], [], [], []).budgets == ()


@pytest.mark.parametrize(
    "schedule",
    ["\u00b9 * * * *", "\u0663 0 * * *", "0 0 * * \u2076", "@hourly2"],
)
def test_a_schedule_with_digits_robfig_cannot_read_fails_closed_without_raising(
    schedule: str,
) -> None:
    # Superscripts and Arabic-Indic digits pass str.isdigit() but not Go's Atoi (issue 43).
    pool: dict[str, Any] = {
        "metadata": {"name": "p"},
        "spec": {
            "template": {"spec": {}},
            "disruption": {"budgets": [{"nodes": "3", "schedule": schedule, "duration": "1h"}]},
        },
    }
    obs = views.pool_observation(pool, [], [], [], [])
    assert obs.budgets == (Budget(nodes="0"),)
    assert "budgets[0].schedule" in obs.budget_problems[0]


def test_a_claim_terminating_its_instance_is_marked() -> None:
    raw = _claim()
    raw["status"]["conditions"].append({"type": "InstanceTerminating", "status": "True"})
    assert views.claim_view(raw).instance_terminating
    assert not views.claim_view(_claim()).instance_terminating
