"""The placeholder Pod manifest (spec 7.5)."""

from __future__ import annotations

from fleetgate.adapters.karpenter.podspec import placeholder_pod
from fleetgate.domain.rotation.cluster import PlaceholderSpec, Requirement, Taint


def _spec(**changes: object) -> PlaceholderSpec:
    values: dict[str, object] = {
        "namespace": "fleetgate-system",
        "name": "fleetgate-surge-default-00001",
        "pool": "default",
        "surge_for": "default-00001",
        "requests": {"cpu": 1500, "memory": 2 * 2**30 * 1000},
        "required": (
            Requirement("karpenter.sh/nodepool", "In", ("default",)),
            Requirement("topology.kubernetes.io/zone", "In", ("us-east-1a",)),
        ),
        "preferred": (Requirement("node.kubernetes.io/instance-type", "In", ("m6i.xlarge",)),),
        "avoid_hosts": ("ip-1", "ip-2"),
        "tolerations": (Taint("dedicated", "batch", "NoSchedule"), Taint("gpu", "", "NoExecute")),
        "labels": {"fleetgate.io/surge-for": "default-00001", "karpenter.sh/nodepool": "default"},
        "annotations": {"karpenter.sh/do-not-disrupt": "true"},
    }
    values.update(changes)
    return PlaceholderSpec(**values)  # type: ignore[arg-type]


def test_placeholder_is_exactly_the_spec_pod() -> None:
    pod = placeholder_pod(_spec())
    assert pod["metadata"] == {
        "name": "fleetgate-surge-default-00001",
        "namespace": "fleetgate-system",
        "labels": {
            "fleetgate.io/surge-for": "default-00001",
            "karpenter.sh/nodepool": "default",
            "app.kubernetes.io/managed-by": "fleetgate",
        },
        "annotations": {"karpenter.sh/do-not-disrupt": "true"},
    }
    spec = pod["spec"]
    assert "ownerReferences" not in pod["metadata"]  # bare: nothing recreates it
    assert spec["priorityClassName"] == "fleetgate-placeholder"
    assert spec["preemptionPolicy"] == "Never"
    assert spec["automountServiceAccountToken"] is False
    [container] = spec["containers"]
    assert container["image"] == "registry.k8s.io/pause:3.10"
    assert container["resources"] == {"requests": {"cpu": "1500m", "memory": "2147483648"}}
    assert spec["affinity"]["nodeAffinity"] == {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["default"]},
                        {
                            "key": "topology.kubernetes.io/zone",
                            "operator": "In",
                            "values": ["us-east-1a"],
                        },
                    ]
                }
            ]
        },
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 100,
                "preference": {
                    "matchExpressions": [
                        {
                            "key": "kubernetes.io/hostname",
                            "operator": "NotIn",
                            "values": ["ip-1", "ip-2"],
                        }
                    ]
                },
            },
            {
                "weight": 1,
                "preference": {
                    "matchExpressions": [
                        {
                            "key": "node.kubernetes.io/instance-type",
                            "operator": "In",
                            "values": ["m6i.xlarge"],
                        }
                    ]
                },
            },
        ],
    }
    assert spec["tolerations"] == [
        {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"},
        {"key": "gpu", "operator": "Equal", "value": "", "effect": "NoExecute"},
    ]


def test_spec_image_and_priority_class_win_over_the_defaults() -> None:
    pod = placeholder_pod(
        _spec(image="mirror.local/pause:3.10", priority_class="custom"),
        default_image="other",
        default_priority_class="other",
    )
    assert pod["spec"]["containers"][0]["image"] == "mirror.local/pause:3.10"
    assert pod["spec"]["priorityClassName"] == "custom"


def test_defaults_fill_an_empty_image_and_priority_class() -> None:
    pod = placeholder_pod(
        _spec(),
        default_image="mirror.local/pause:3.10",
        default_priority_class="rotation-placeholder",
    )
    assert pod["spec"]["containers"][0]["image"] == "mirror.local/pause:3.10"
    assert pod["spec"]["priorityClassName"] == "rotation-placeholder"


def test_nothing_to_avoid_or_prefer_leaves_no_preferred_terms_and_no_tolerations() -> None:
    pod = placeholder_pod(_spec(avoid_hosts=(), preferred=(), tolerations=()))
    assert (
        "preferredDuringSchedulingIgnoredDuringExecution"
        not in (pod["spec"]["affinity"]["nodeAffinity"])
    )
    assert "tolerations" not in pod["spec"]


def test_exists_operators_carry_no_values() -> None:
    pod = placeholder_pod(_spec(required=(Requirement("gpu", "Exists"),)))
    term = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"][0]
    assert term == {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}
