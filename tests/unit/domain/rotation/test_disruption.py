"""Karpenter's own disruption state: the disrupted taint, Pod opt-outs, pool states, limits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleetgate.domain.rotation.annotations import KARPENTER_DO_NOT_DISRUPT
from fleetgate.domain.rotation.budgets import DEFAULT_BUDGETS, remaining
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


# Karpenter's own cases (pkg/utils/pod/suite_test.go, IsDoNotDisruptActive: a Pod started 10m
# ago) and the values it ignores because Go's time.ParseDuration refuses them (issue 43).
@pytest.mark.parametrize(
    ("value", "active"),
    [
        ("true", True),
        ("invalid-format", False),
        ("0s", False),
        ("-5m", False),
        ("15m", True),
        ("5m", False),
        ("10m", False),  # ran out exactly now
        ("10m1ns", True),  # a nanosecond more still holds, as Go compares nanoseconds
        ("2h", True),
        (" 2h", False),  # whitespace: Go reads a unit " " or "h " and refuses it
        ("2h ", False),
        ("2h\n", False),  # what a YAML "|" block gives
        ("\t2h", False),
        ("2562047h", True),  # just inside Go's limit of 2^63-1 ns
        ("2562048h", False),  # past it: Go refuses, so Karpenter ignores the annotation
        ("9223372036854775808ns", False),
        ("1d", False),
        ("+2h", True),  # Go takes a sign
        ("1.5h", True),
        ("٣h", False),  # a non-ASCII digit
    ],
)
def test_karpenters_reading_of_a_duration_opt_out(value: str, active: bool) -> None:
    assert pod_opt_out_active(pod(value, started=timedelta(minutes=10)), NOW) is active


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


def test_claims_terminating_their_instance_count_for_nothing() -> None:
    # BuildDisruptionBudgetMapping skips a claim whose InstanceTerminating is True: it is in
    # neither the total nor the disrupting count (it is deleting, and its Node may be NotReady).
    now = datetime(2024, 1, 1, tzinfo=UTC)
    claims = (
        NodeClaimView("a", now, None, ready=True, node_name="a"),
        NodeClaimView("b", now, None, ready=True, node_name="b"),
        NodeClaimView(
            "c", now, None, ready=True, node_name="c", deleting_at=now, instance_terminating=True
        ),
    )
    nodes = (NodeView("a", ready=True), NodeView("b", ready=True), NodeView("c", ready=False))
    obs = PoolObservation("p", "1", None, claims=claims, nodes=nodes)
    assert budget_counts(obs) == (2, 0)
    assert ready_count(obs) == 2
    # 10% of 2 nodes rounds up to 1 and none is under way: a rotation may start. Counted twice,
    # the terminating claim would have used that one up.
    assert remaining(DEFAULT_BUDGETS, now, *budget_counts(obs)) == 1


def test_an_unreadable_budget_is_a_pool_finding_naming_the_field() -> None:
    problem = "nodepool p: spec.disruption.budgets[0].schedule: '¹' is not a number"
    (found,) = pool_findings(obs(budget_problems=(problem,)))
    assert found.code is FindingCode.BUDGET_UNREADABLE and not found.fatal
    assert found.message == problem
