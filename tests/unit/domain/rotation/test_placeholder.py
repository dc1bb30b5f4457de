"""The placeholder Pod: name, footprint, clamp, affinity (spec §7.5)."""

from __future__ import annotations

from datetime import UTC, datetime

from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.cluster import (
    NodeClaimView,
    NodeView,
    PodView,
    PoolObservation,
    Requirement,
)
from fleetgate.domain.rotation.placeholder import (
    allows,
    build_placeholder,
    clamp,
    footprint,
    key_values,
    node_pinned,
    placeholder_name,
)

T0 = datetime(2024, 1, 1, tzinfo=UTC)
ZONE = "topology.kubernetes.io/zone"


def test_the_name_is_prefixed_and_long_names_are_cut_and_hashed() -> None:
    assert placeholder_name("c1") == "fleetgate-surge-c1"
    long = placeholder_name("x" * 300)
    assert len(long) == 253 and long != placeholder_name("x" * 299)
    assert long.startswith("fleetgate-surge-xxx")


def test_node_pinned_pods_are_recognised() -> None:
    assert node_pinned(PodView("ns", "a", node_selector={"kubernetes.io/hostname": "n"}), "n")
    assert node_pinned(PodView("ns", "a", required_hostnames=(("n",), ("n",))), "n")
    assert not node_pinned(PodView("ns", "a", required_hostnames=(("n",), ())), "n")
    assert not node_pinned(PodView("ns", "a", required_hostnames=(("n", "m"),)), "n")


def test_the_footprint_counts_only_movable_running_workload() -> None:
    pods = [
        PodView("ns", "app", node_name="n", phase="Running", requests={"cpu": 500}),
        PodView("ns", "app2", node_name="n", phase="Running", requests={"cpu": 250, "memory": 9}),
        PodView(
            "ns",
            "ds",
            node_name="n",
            phase="Running",
            requests={"cpu": 100},
            owner_kind="DaemonSet",
        ),
        PodView("ns", "mirror", node_name="n", phase="Running", requests={"cpu": 100}, mirror=True),
        PodView("ns", "done", node_name="n", phase="Succeeded", requests={"cpu": 100}),
        PodView(
            "ns",
            "pinned",
            node_name="n",
            phase="Running",
            requests={"cpu": 100},
            node_selector={"kubernetes.io/hostname": "n"},
        ),
        PodView("ns", "elsewhere", node_name="m", phase="Running", requests={"cpu": 100}),
    ]
    assert footprint(pods, "n") == {"cpu": 750, "memory": 9}


def claim(**alloc: int) -> NodeClaimView:
    return NodeClaimView("c", T0, None, allocatable=alloc)


def test_the_clamp_fits_the_footprint_beside_the_daemonsets() -> None:
    ds = [PodView("ns", "ds", phase="Running", requests={"cpu": 500}, owner_kind="DaemonSet")]
    out = clamp({"cpu": 4000, "memory": 10}, claim(cpu=4000, memory=100), None, ds)
    assert out.requests == {"cpu": 3500, "memory": 10}
    assert out.clamped == ("cpu",) and out.band_exceeded == ("cpu",) and out.refused == ()


def test_a_shortfall_within_the_band_is_only_clamped() -> None:
    ds = [PodView("ns", "ds", phase="Running", requests={"cpu": 500}, owner_kind="DaemonSet")]
    node = NodeView("n", allocatable={"cpu": 4600})
    out = clamp({"cpu": 4000}, claim(cpu=4000), node, ds)
    assert out.clamped == ("cpu",) and out.band_exceeded == ()


def test_no_room_at_all_refuses_and_keeps_the_full_request() -> None:
    ds = [PodView("ns", "ds", phase="Running", requests={"cpu": 4000}, owner_kind="DaemonSet")]
    out = clamp({"cpu": 100}, claim(cpu=4000), None, ds)
    assert out.requests == {"cpu": 100} and out.refused == ("cpu",)


def test_no_allocatable_means_no_clamp() -> None:
    assert clamp({"cpu": 10**9}, claim(), None, []).requests == {"cpu": 10**9}


def test_template_requirements_filter_the_values() -> None:
    assert allows(Requirement("k", "In", ("a",)), "a")
    assert not allows(Requirement("k", "NotIn", ("a",)), "a")
    assert allows(Requirement("k", "Exists"), "a")
    assert not allows(Requirement("k", "DoesNotExist"), "a")
    assert allows(Requirement("k", "Gt", ("3",)), "4") and not allows(
        Requirement("k", "Gt", ("4",)), "4"
    )
    assert allows(Requirement("k", "Lte", ("4",)), "4")
    assert not allows(Requirement("k", "Lt", ("x",)), "1")  # malformed bound drops the value
    c = NodeClaimView("c", T0, None, requirements=(Requirement(ZONE, "In", ("a", "b")),))
    assert key_values(ZONE, c, None, [Requirement(ZONE, "NotIn", ("b",))]) == ("a",)
    assert key_values(ZONE, c, NodeView("n", labels={ZONE: "b"}), []) == ("b",)


def test_the_placeholder_pins_the_pool_and_required_keys_and_avoids_hosts() -> None:
    c = NodeClaimView("c", T0, None, node_name="n", allocatable={"cpu": 4000})
    obs = PoolObservation(
        name="pool",
        version="1",
        expire_after=None,
        claims=(c,),
        nodes=(NodeView("n", labels={ZONE: "a"}),),
        pods=(PodView("ns", "app", node_name="n", phase="Running", requests={"cpu": 3000}),),
    )
    spec, sized = build_placeholder(
        obs,
        c,
        namespace="sys",
        required_keys=[ZONE, "missing"],
        preferred_keys=[],
        avoid_hosts=["n", "m", "n"],
    )
    assert spec.requests == {"cpu": 3000} and sized.clamped == ()
    assert spec.required == (
        Requirement(ann.KARPENTER_NODEPOOL, "In", ("pool",)),
        Requirement(ZONE, "In", ("a",)),
    )
    assert spec.avoid_hosts == ("m", "n")
    assert spec.labels[ann.SURGE_FOR] == "c" and spec.namespace == "sys"
