"""Karpenter's own disruption state: the disrupted taint, Pod opt-outs, pool states, limits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleetgate.domain.rotation.annotations import KARPENTER_DO_NOT_DISRUPT
from fleetgate.domain.rotation.cluster import (
    NodeClaimView,
    NodeView,
    PodView,
    PoolObservation,
    Taint,
)
from fleetgate.domain.rotation.context import MachineConfig, Pass
from fleetgate.domain.rotation.disruption import (
    DISRUPTED_TAINT,
    budget_counts,
    node_disrupted,
    node_limit_reached,
    opt_out_expiry,
    pod_opt_out_active,
    pod_opted_out_claims,
    pool_findings,
    ready_count,
)
from fleetgate.domain.rotation.findings import FindingCode
from fleetgate.domain.rotation.gates import Blocked, GateReason
from fleetgate.domain.rotation.gating import start_gates
from fleetgate.domain.rotation.selection import ClaimView
from tests.unit.domain.rotation.test_machine import policy

NOW = datetime(2024, 6, 1, 12, tzinfo=UTC)
H = timedelta(hours=1)


def pod(value: str | None, started: timedelta | None = H, **kw: object) -> PodView:
    """A running pod on node n1, started ``started`` ago, with the opt-out ``value``."""
    annotations = {} if value is None else {KARPENTER_DO_NOT_DISRUPT: value}
    return PodView(
        "app",
        "w",
        node_name="n1",
        phase=str(kw.pop("phase", "Running")),
        annotations=annotations,
        started_at=None if started is None else NOW - started,
        **kw,  # type: ignore[arg-type]
    )


def test_the_disrupted_taint_marks_a_node_karpenter_is_replacing() -> None:
    assert node_disrupted(NodeView("n", taints=(Taint(DISRUPTED_TAINT, "", "NoSchedule"),)))
    assert not node_disrupted(NodeView("n", taints=(Taint("other", "", "NoSchedule"),)))
    assert not node_disrupted(NodeView("n"))


@pytest.mark.parametrize(
    ("value", "started", "active"),
    [
        ("true", H, True),
        ("True", H, False),  # Karpenter compares exactly; not a Go duration either
        ("2h", H, True),  # started 1h ago: 1h of its 2h left
        ("1h", H, False),  # ran out exactly now (active while age < duration)
        ("30m", H, False),
        ("1h30m", H, True),
        ("2h", None, True),  # no start time yet: still blocking, as Karpenter fails safe
        ("0s", H, False),  # not positive: ignored
        ("-1h", H, False),
        ("1d", H, False),  # not a Go duration: ignored
        ("soon", H, False),
        (None, H, False),
    ],
)
def test_pod_opt_out_values(value: str | None, started: timedelta | None, active: bool) -> None:
    assert pod_opt_out_active(pod(value, started), NOW) is active


def test_only_active_pods_opt_out() -> None:
    assert not pod_opt_out_active(pod("true", phase="Succeeded"), NOW)
    assert not pod_opt_out_active(pod("true", phase="Failed"), NOW)
    assert not pod_opt_out_active(pod("true", deleting=True), NOW)
    assert pod_opt_out_active(pod("true", phase="Pending"), NOW)


def test_a_node_holding_an_opted_out_pod_makes_its_claim_ineligible() -> None:
    claims = [
        ClaimView("a", NOW, node_name="n1"),
        ClaimView("b", NOW, node_name="n2"),
        ClaimView("c", NOW),
    ]
    assert pod_opted_out_claims(claims, [pod("true")], NOW) == frozenset({"a"})
    assert pod_opted_out_claims(claims, [pod("30m")], NOW) == frozenset()


def test_a_duration_opt_out_says_when_it_runs_out() -> None:
    assert opt_out_expiry([pod("2h"), pod("3h"), pod("true")], NOW) == NOW + H
    assert opt_out_expiry([pod("30m"), pod("2h", started=None)], NOW) is None


def obs(**kw: object) -> PoolObservation:
    return PoolObservation(name="p", version="1", expire_after=None, **kw)  # type: ignore[arg-type]


def test_node_limit_counts_status_resources_nodes() -> None:
    assert node_limit_reached(obs(limits={"nodes": 3000}, resources={"nodes": 3000}))
    assert not node_limit_reached(obs(limits={"nodes": 3000}, resources={"nodes": 2000}))
    assert not node_limit_reached(obs(limits={"cpu": 3000}, resources={"nodes": 9000}))
    assert not node_limit_reached(obs(limits={"nodes": 1000}))  # status not yet counted: 0


def test_pool_findings_and_gates_name_each_state() -> None:
    assert pool_findings(obs()) == ()
    static = obs(replicas=3, limits={"nodes": 3000}, resources={"nodes": 3000})
    assert [f.code for f in pool_findings(static)] == [
        FindingCode.STATIC_NODE_POOL,
        FindingCode.NODE_LIMIT_REACHED,
    ]
    assert all(not f.fatal for f in pool_findings(static))
    assert "3 of spec.limits.nodes 3" in pool_findings(static)[1].message
    assert [f.code for f in pool_findings(obs(ready=False))] == [FindingCode.NODE_POOL_NOT_READY]

    blocked = _first_closed_gate(static)
    assert blocked is not None and blocked.reason is GateReason.STATIC_NODE_POOL
    assert blocked.until is None
    not_ready = _first_closed_gate(obs(ready=False))
    assert not_ready is not None and not_ready.reason is GateReason.NODE_POOL_NOT_READY
    assert not_ready.until is None
    assert _first_closed_gate(obs()) is None


def _first_closed_gate(pool: PoolObservation) -> Blocked | None:
    """The first closed start gate over ``pool`` inside a window (the gate list, gating.py)."""
    return start_gates(Pass.begin(pool, policy().resolve(None), NOW, MachineConfig())).blocked


def test_budget_counts_count_as_karpenter_counts() -> None:
    # ready/initialized claims count; deleting, DisruptionReason, a tainted or NotReady Node
    # each make one disrupting (once, however many apply).
    now = datetime(2024, 1, 1, tzinfo=UTC)
    claims = (
        NodeClaimView("a", now, None, ready=True, node_name="a"),
        NodeClaimView("b", now, None, ready=True, node_name="b", deleting_at=now),
        NodeClaimView("c", now, None, ready=True, node_name="c", disruption_reason="Drifted"),
        NodeClaimView("d", now, None, ready=True, node_name="d"),
        NodeClaimView("e", now, None, ready=True, node_name="e", deleting_at=now),
        NodeClaimView("f", now, None, ready=False, node_name="f"),  # still coming up: not counted
    )
    nodes = (
        NodeView("a", ready=True),
        NodeView("b", ready=True),
        NodeView("c", ready=True, taints=(Taint(DISRUPTED_TAINT),)),
        NodeView("d", ready=False),
        NodeView("e", ready=False, taints=(Taint(DISRUPTED_TAINT),)),
        NodeView("f", ready=False),
    )
    obs = PoolObservation("p", "1", None, claims=claims, nodes=nodes)
    assert budget_counts(obs) == (5, 4)
    assert ready_count(obs) == 5
