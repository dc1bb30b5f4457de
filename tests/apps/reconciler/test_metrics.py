"""The reconciler's Prometheus series: ledger figures, drift, pass health, departed nodes."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from prometheus_client import CollectorRegistry

from fleetgate.apps.reconciler.metrics import ALIASES_REMOVED_IN, ReconcilerMetrics
from fleetgate.domain.capacity.dimensions import Resources
from fleetgate.domain.capacity.model import ClusterState
from fleetgate.domain.capacity.reconcile import NodeCounters, PassReport, Snapshot, reconcile

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def report(*nodes: tuple[str, Resources, Resources], duration: float = 0.5) -> PassReport:
    """A pass over nodes given as (name, stored used, recomputed used); limits 10/1000/100."""
    snapshot = Snapshot(
        nodes=[NodeCounters(n, Resources(10, 1000, 100), stored, 1.5) for n, stored, _ in nodes],
        node_usage={n: used for n, _, used in nodes},
        namespace_usage={"web": Resources(3, 0, 0)},
        charges=[],
        claims=[],
        cluster=ClusterState(Resources(), Resources(), Resources(), NOW),
    )
    return PassReport(reconcile(snapshot, NOW, 600), duration)


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_a_pass_publishes_node_and_cluster_figures_and_its_health() -> None:
    registry = CollectorRegistry()
    metrics = ReconcilerMetrics(registry)
    metrics.record_pass(report(("a", Resources(3, 0, 0), Resources(3, 0, 0))), NOW)
    assert value(registry, "fleetgate_capacity_node_limit", node="a", resource="cpus") == 10
    assert value(registry, "fleetgate_capacity_node_used", node="a", resource="cpus") == 3
    assert value(registry, "fleetgate_capacity_node_expected_demand", node="a") == 0.0
    assert value(registry, "fleetgate_capacity_cluster_total", resource="memory_mb") == 1000
    assert value(registry, "fleetgate_capacity_cluster_unclaimed_used", resource="cpus") == 3
    assert value(registry, "fleetgate_capacity_cluster_claimed", resource="cpus") == 0
    assert value(registry, "fleetgate_capacity_reconcile_passes_total") == 1
    assert value(registry, "fleetgate_capacity_reconcile_failures_total") == 0
    assert value(registry, "fleetgate_capacity_reconcile_last_success_timestamp_seconds") == (
        NOW.timestamp()
    )
    assert value(registry, "fleetgate_capacity_reconcile_last_duration_seconds") == 0.5
    assert value(registry, "fleetgate_capacity_reconcile_drifted_nodes") == 0


def test_drift_is_published_per_node_signed_and_summed_per_pass_and_overall() -> None:
    registry = CollectorRegistry()
    metrics = ReconcilerMetrics(registry)
    metrics.record_pass(
        report(
            ("a", Resources(5, 0, 0), Resources(3, 0, 0)),
            ("b", Resources(0, 0, 0), Resources(1, 0, 7)),
        ),
        NOW,
    )
    assert value(registry, "fleetgate_capacity_node_drift", node="a", resource="cpus") == -2
    assert value(registry, "fleetgate_capacity_node_drift", node="b", resource="disk_gb") == 7
    assert value(registry, "fleetgate_capacity_reconcile_drifted_nodes") == 2
    assert value(registry, "fleetgate_capacity_reconcile_drift", resource="cpus") == 3
    metrics.record_pass(report(("a", Resources(3, 0, 0), Resources(3, 0, 0))), NOW)
    assert value(registry, "fleetgate_capacity_reconcile_drift", resource="cpus") == 0
    assert (
        value(registry, "fleetgate_capacity_reconcile_drift_corrected_total", resource="cpus") == 3
    )
    assert value(registry, "fleetgate_capacity_reconcile_drifted_nodes") == 0


def test_a_departed_node_loses_its_series() -> None:
    registry = CollectorRegistry()
    metrics = ReconcilerMetrics(registry)
    metrics.record_pass(
        report(("a", Resources(), Resources()), ("b", Resources(), Resources())), NOW
    )
    assert value(registry, "fleetgate_capacity_node_used", node="b", resource="cpus") == 0
    metrics.record_pass(report(("a", Resources(), Resources())), NOW)
    for name in ("node_limit", "node_used", "node_drift"):
        assert value(registry, f"fleetgate_capacity_{name}", node="b", resource="cpus") is None
    assert value(registry, "fleetgate_capacity_node_expected_demand", node="b") is None
    assert value(registry, "fleetgate_capacity_node_used", node="a", resource="cpus") == 0


def test_a_failure_counts_and_keeps_the_last_good_figures() -> None:
    registry = CollectorRegistry()
    metrics = ReconcilerMetrics(registry)
    metrics.record_pass(report(("a", Resources(3, 0, 0), Resources(3, 0, 0))), NOW)
    metrics.record_failure(2.5)
    assert value(registry, "fleetgate_capacity_reconcile_failures_total") == 1
    assert value(registry, "fleetgate_capacity_reconcile_passes_total") == 1
    assert value(registry, "fleetgate_capacity_reconcile_last_duration_seconds") == 2.5
    assert value(registry, "fleetgate_capacity_reconcile_last_success_timestamp_seconds") == (
        NOW.timestamp()
    )
    assert value(registry, "fleetgate_capacity_node_used", node="a", resource="cpus") == 3


def test_memory_and_disk_are_also_published_in_bytes_and_the_old_values_kept() -> None:
    registry = CollectorRegistry()
    metrics = ReconcilerMetrics(registry)
    metrics.record_pass(report(("a", Resources(3, 512, 7), Resources(3, 256, 9))), NOW)
    mib, gib = 2**20, 2**30
    node_limit = "fleetgate_capacity_node_limit_bytes"
    assert value(registry, node_limit, node="a", resource="memory") == 1000 * mib
    assert value(registry, node_limit, node="a", resource="disk") == 100 * gib
    node_used = "fleetgate_capacity_node_used_bytes"
    assert value(registry, node_used, node="a", resource="memory") == 256 * mib
    assert value(registry, "fleetgate_capacity_node_drift_bytes", node="a", resource="disk") == (
        2 * gib
    )
    assert (
        value(registry, "fleetgate_capacity_cluster_total_bytes", resource="memory") == 1000 * mib
    )
    assert value(registry, "fleetgate_capacity_reconcile_drift_bytes", resource="memory") == (
        256 * mib
    )
    corrected = "fleetgate_capacity_reconcile_drift_corrected_bytes_total"
    assert value(registry, corrected, resource="disk") == 2 * gib
    # Bytes only for bytes: vCPUs stay a count on the unit-less family.
    assert value(registry, node_used, node="a", resource="cpus") is None
    assert value(registry, "fleetgate_capacity_node_used", node="a", resource="cpus") == 3
    # The old MB/GB values, deprecated for one release.
    assert value(registry, "fleetgate_capacity_node_used", node="a", resource="memory_mb") == 256
    # A node that leaves takes its byte series with it.
    metrics.record_pass(report(("b", Resources(), Resources())), NOW)
    assert value(registry, node_used, node="a", resource="memory") is None
    assert value(registry, node_used, node="b", resource="memory") == 0


def test_every_canonical_family_has_one_unit_and_the_mixed_aliases_say_when_they_go() -> None:
    registry = CollectorRegistry()
    metrics = ReconcilerMetrics(registry)
    metrics.record_pass(report(("a", Resources(3, 512, 7), Resources(3, 256, 9))), NOW)
    assert value(registry, "fleetgate_capacity_node_limit_cpus", node="a") == 10
    assert value(registry, "fleetgate_capacity_node_used_cpus", node="a") == 3
    assert value(registry, "fleetgate_capacity_cluster_total_cpus") == 10
    assert value(registry, "fleetgate_capacity_reconcile_drift_corrected_cpus_total") == 0
    families = {f.name: f for f in registry.collect()}
    for family in families.values():
        resources = {s.labels.get("resource") for s in family.samples} - {None}
        if family.documentation.startswith("DEPRECATED"):
            # The old mixed family: vCPUs, MB and GB side by side, kept for one release only.
            assert f"removed in fleetgate {ALIASES_REMOVED_IN}" in family.documentation
            assert family.name + "_cpus" in family.documentation
            assert family.name + "_bytes" in family.documentation
        elif family.name.endswith("_bytes"):
            assert resources <= {"memory", "disk"}, family.name
        else:
            assert not resources, f"{family.name} mixes {resources} in one metric"
    # A node that leaves takes its vCPU series with it.
    metrics.record_pass(report(("b", Resources(), Resources())), NOW)
    assert value(registry, "fleetgate_capacity_node_limit_cpus", node="a") is None


def test_the_removal_release_is_stated_in_the_docs() -> None:
    decisions = (Path(__file__).parents[3] / "docs" / "decisions.md").read_text()
    assert f"removed in {ALIASES_REMOVED_IN}" in decisions
    for alias in ("fleetgate_capacity_node_limit{", "fleetgate_rotation_rotation_chances"):
        assert alias in decisions
