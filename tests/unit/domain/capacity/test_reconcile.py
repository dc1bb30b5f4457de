"""One reconcile pass's arithmetic: recompute, demand decay, the expiry sweep, drift, summary."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetgate.domain.capacity.claims import Claim, ClaimState
from fleetgate.domain.capacity.dimensions import Resources
from fleetgate.domain.capacity.model import ClusterState
from fleetgate.domain.capacity.reconcile import (
    DemandCharge,
    Drift,
    NodeCounters,
    PassReport,
    Snapshot,
    expected_demand,
    reconcile,
)
from tests.strategies import small_resources

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def node(
    name: str, used: Resources, limits: Resources | None = None, demand: float = 0.0
) -> NodeCounters:
    return NodeCounters(name, limits or Resources(100, 1000, 100), used, demand)


def claim(cid: str, ns: str, limit: Resources, used: Resources, expires_in: float = 600) -> Claim:
    return Claim(
        id=cid,
        namespace=ns,
        limit=limit,
        used=used,
        state=ClaimState.ACTIVE,
        expires_at=NOW + timedelta(seconds=expires_in),
        created_at=NOW - timedelta(hours=1),
        updated_at=NOW - timedelta(hours=1),
    )


def row(total: Resources, claimed: Resources, unclaimed: Resources) -> ClusterState:
    return ClusterState(total, claimed, unclaimed, NOW - timedelta(minutes=5))


def test_drift_is_signed_recomputed_minus_stored() -> None:
    drift = Drift.between(Resources(5, 100, 0), Resources(3, 150, 0))
    assert drift.as_dict() == {"cpus": -2, "memory_mb": 50, "disk_gb": 0}
    assert drift.magnitude() == Resources(2, 50, 0)
    assert not drift.is_zero() and Drift().is_zero()
    with pytest.raises(ValueError, match="dimension: unknown"):
        drift.get("gpus")


def test_demand_decays_linearly_and_ignores_the_future() -> None:
    charges = [
        DemandCharge("a", 6.0, NOW),  # fresh: all of it
        DemandCharge("a", 6.0, NOW - timedelta(seconds=300)),  # half way: half
        DemandCharge("a", 6.0, NOW - timedelta(seconds=600)),  # decayed: nothing
        DemandCharge("a", 2.4, NOW + timedelta(seconds=30)),  # clock skew: counts whole
    ]
    assert expected_demand(charges, NOW, 600) == pytest.approx(6.0 + 3.0 + 0.0 + 2.4)
    assert expected_demand(charges, NOW, 0) == 0.0


def test_a_consistent_ledger_reports_zero_drift() -> None:
    snap = Snapshot(
        nodes=[node("a", Resources(4, 400, 10)), node("b", Resources(2, 100, 0))],
        node_usage={"a": Resources(4, 400, 10), "b": Resources(2, 100, 0)},
        namespace_usage={"ci": Resources(4, 400, 10), "web": Resources(2, 100, 0)},
        charges=[],
        claims=[claim("c1", "ci", Resources(8, 800, 20), Resources(4, 400, 10))],
        cluster=row(Resources(200, 2000, 200), Resources(8, 800, 20), Resources(2, 100, 0)),
    )
    result = reconcile(snap, NOW, 600)
    summary = result.summary(0.25)
    assert summary.clean
    assert (summary.nodes, summary.drifted_nodes, summary.drift) == (2, 0, Resources())
    assert summary.duration_seconds == 0.25
    assert result.claim_of == {"ci": "c1"}


def test_injected_drift_is_reported_exactly_and_repaired() -> None:
    snap = Snapshot(
        nodes=[node("a", Resources(7, 400, 10)), node("b", Resources(2, 0, 3))],
        node_usage={"a": Resources(4, 400, 10), "b": Resources(2, 100, 0)},
        namespace_usage={"web": Resources(6, 500, 10)},
        charges=[],
        claims=[],
        cluster=row(Resources(200, 2000, 200), Resources(), Resources(9, 500, 10)),
    )
    result = reconcile(snap, NOW, 600)
    a, b = result.nodes
    assert a.drift == Drift(-3, 0, 0) and a.used == Resources(4, 400, 10)
    assert b.drift == Drift(0, 100, -3) and b.used == Resources(2, 100, 0)
    summary = result.summary()
    assert summary.drifted_nodes == 2
    assert summary.drift == Resources(3, 100, 3)
    assert result.cluster.drift["unclaimed_used"] == Drift(-3, 0, 0)
    assert result.cluster.unclaimed_used == Resources(6, 500, 10)
    assert summary.cluster_drifted and not summary.clean


def test_claim_usage_is_the_namespaces_usage_and_overage_is_unclaimed() -> None:
    snap = Snapshot(
        nodes=[node("a", Resources(30, 0, 0))],
        node_usage={"a": Resources(30, 0, 0)},
        namespace_usage={"ci": Resources(25, 0, 0), "web": Resources(5, 0, 0)},
        charges=[],
        claims=[claim("c1", "ci", Resources(10, 0, 0), Resources(20, 0, 0))],
        cluster=row(Resources(100, 1000, 100), Resources(10, 0, 0), Resources(15, 0, 0)),
    )
    result = reconcile(snap, NOW, 600)
    (c,) = result.claims
    assert c.used == Resources(25, 0, 0) and c.drift == Drift(5, 0, 0)
    # 5 of web's usage + 15 of ci's overage above its limit of 10.
    assert result.cluster.unclaimed_used == Resources(20, 0, 0)
    assert result.cluster.claimed == Resources(10, 0, 0)
    assert result.summary().drifted_claims == 1


def test_the_sweep_expires_due_claims_and_their_accounting_is_not_drift() -> None:
    # ci's claim expired a second ago; a placement admitted since went to the unclaimed side.
    due = claim("c1", "ci", Resources(10, 0, 0), Resources(4, 0, 0), expires_in=-1)
    snap = Snapshot(
        nodes=[node("a", Resources(6, 0, 0))],
        node_usage={"a": Resources(6, 0, 0)},
        namespace_usage={"ci": Resources(6, 0, 0)},
        charges=[],
        claims=[due],
        cluster=row(Resources(100, 1000, 100), Resources(10, 0, 0), Resources(2, 0, 0)),
    )
    result = reconcile(snap, NOW, 600)
    assert result.expired == (due,)
    assert result.claims == () and result.claim_of == {}
    assert result.cluster.claimed == Resources() and result.cluster.unclaimed_used == Resources(
        6, 0, 0
    )
    summary = result.summary()
    assert summary.claims_expired == 1 and summary.clean


def test_expiry_is_at_expires_at_exactly() -> None:
    at_expiry = claim("c1", "ci", Resources(1, 0, 0), Resources(), expires_in=0)
    snap = Snapshot([], {}, {}, [], [at_expiry], row(Resources(), Resources(1, 0, 0), Resources()))
    assert reconcile(snap, NOW, 600).expired == (at_expiry,)


def test_total_is_the_sum_of_node_limits_and_a_missing_row_is_created() -> None:
    snap = Snapshot(
        nodes=[
            node("a", Resources(), Resources(12, 100, 5)),
            node("b", Resources(), Resources(4, 50, 5)),
        ],
        node_usage={},
        namespace_usage={},
        charges=[],
        claims=[],
        cluster=None,
    )
    result = reconcile(snap, NOW, 600)
    assert result.cluster.total == Resources(16, 150, 10) and result.cluster.created
    assert result.cluster.drift["total"] == Drift(16, 150, 10)


def test_expected_demand_is_snapped_to_the_decayed_sum_per_node() -> None:
    snap = Snapshot(
        nodes=[node("a", Resources(), demand=9.0), node("b", Resources(), demand=1.0)],
        node_usage={},
        namespace_usage={},
        charges=[DemandCharge("a", 2.4, NOW - timedelta(seconds=150))],
        claims=[],
        cluster=row(Resources(200, 2000, 200), Resources(), Resources()),
    )
    a, b = reconcile(snap, NOW, 600).nodes
    assert a.expected_demand == pytest.approx(1.8) and a.stored_expected_demand == 9.0
    assert b.expected_demand == 0.0
    # demand moving is decay, not drift
    assert a.drift.is_zero() and b.drift.is_zero()


def test_demand_an_adapter_already_decayed_is_taken_as_it_is_beside_the_charges() -> None:
    snap = Snapshot(
        nodes=[
            node("a", Resources(), demand=9.0),
            node("b", Resources(), demand=0.5),
            node("c", Resources(1, 0, 0)),
        ],
        node_usage={"c": Resources(1, 0, 0)},
        namespace_usage={},
        charges=[DemandCharge("a", 2.4, NOW - timedelta(seconds=150))],
        claims=[],
        cluster=row(Resources(300, 3000, 300), Resources(), Resources()),
        node_demand={"a": 1.0, "b": 0.5},
    )
    a, b, c = reconcile(snap, NOW, 600).nodes
    assert a.expected_demand == pytest.approx(1.0 + 1.8)
    assert b.expected_demand == 0.5 and c.expected_demand == 0.0
    # only a row that differs from what is stored needs writing
    assert a.changed and not b.changed and not c.changed


def test_a_node_whose_usage_drifted_needs_writing() -> None:
    snap = Snapshot([node("a", Resources(2, 0, 0))], {"a": Resources(3, 0, 0)}, {}, [], [], None)
    (a,) = reconcile(snap, NOW, 600).nodes
    assert a.changed and not a.drift.is_zero()


def test_a_pass_report_carries_its_duration_into_the_summary() -> None:
    snap = Snapshot([], {}, {}, [], [], row(Resources(), Resources(), Resources()))
    report = PassReport(reconcile(snap, NOW, 600), duration_seconds=1.5)
    assert report.summary.duration_seconds == 1.5


@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["x", "y"]), small_resources()),
        max_size=12,
    ),
    st.lists(small_resources(), min_size=3, max_size=3),
)
def test_reconciling_a_reconciled_ledger_reports_zero_drift(
    placements: list[tuple[str, str, Resources]], stored: list[Resources]
) -> None:
    node_usage: dict[str, Resources] = {}
    ns_usage: dict[str, Resources] = {}
    for n, ns, size in placements:
        node_usage[n] = node_usage.get(n, Resources()).plus(size)
        ns_usage[ns] = ns_usage.get(ns, Resources()).plus(size)
    names = ["a", "b", "c"]
    first = Snapshot(
        nodes=[node(n, s) for n, s in zip(names, stored, strict=True)],
        node_usage=node_usage,
        namespace_usage=ns_usage,
        charges=[],
        claims=[claim("c1", "x", Resources(10, 10, 10), Resources())],
        cluster=row(Resources(), Resources(), Resources()),
    )
    once = reconcile(first, NOW, 600)
    second = Snapshot(
        nodes=[NodeCounters(n.name, n.limits, n.used, n.expected_demand) for n in once.nodes],
        node_usage=node_usage,
        namespace_usage=ns_usage,
        charges=[],
        claims=[claim(c.id, c.namespace, c.limit, c.used) for c in once.claims],
        cluster=ClusterState(
            once.cluster.total, once.cluster.claimed, once.cluster.unclaimed_used, NOW
        ),
    )
    assert reconcile(second, NOW, 600).summary().clean
