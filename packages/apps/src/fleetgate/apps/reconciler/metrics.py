"""The reconciler's Prometheus series, prefixed ``fleetgate_capacity_`` (capacity spec 11.2).

Gauges describe the ledger as the last successful pass left it; counters and the last-success
time describe the reconciler itself. A node that has left the ledger has its series removed on
the next pass, so dashboards never show a departed node's last figures as current.
"""

from __future__ import annotations

import contextlib
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Gauge

from fleetgate.domain.capacity.dimensions import ALLOCATION
from fleetgate.domain.capacity.reconcile import PassReport

PREFIX = "fleetgate_capacity_"


class ReconcilerMetrics:
    """Every reconciler series, registered on the given registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

        def gauge(name: str, doc: str, *labels: str) -> Gauge:
            return Gauge(PREFIX + name, doc, list(labels), registry=registry)

        def counter(name: str, doc: str, *labels: str) -> Counter:
            return Counter(PREFIX + name, doc, list(labels), registry=registry)

        self.node_limit = gauge("node_limit", "A node's admission limit.", "node", "resource")
        self.node_used = gauge("node_used", "A node's recomputed usage.", "node", "resource")
        self.node_demand = gauge(
            "node_expected_demand", "A node's decayed expected demand (load units).", "node"
        )
        self.node_drift = gauge(
            "node_drift",
            "Signed drift of a node's usage corrected by the last pass (recomputed - stored).",
            "node",
            "resource",
        )
        self.cluster_total = gauge("cluster_total", "Sum of the node limits.", "resource")
        self.cluster_claimed = gauge(
            "cluster_claimed", "Sum of the active claims' limits.", "resource"
        )
        self.cluster_unclaimed = gauge(
            "cluster_unclaimed_used",
            "Usage of unclaimed namespaces plus the claims' advisory overage.",
            "resource",
        )
        self.passes = counter("reconcile_passes", "Reconcile passes that completed.")
        self.failures = counter("reconcile_failures", "Reconcile passes that failed.")
        self.last_success = gauge(
            "reconcile_last_success_timestamp_seconds", "When the last pass completed (unix s)."
        )
        self.last_duration = gauge(
            "reconcile_last_duration_seconds", "How long the last pass took, failed or not."
        )
        self.drifted_nodes = gauge("reconcile_drifted_nodes", "Nodes the last pass corrected.")
        self.drifted_claims = gauge(
            "reconcile_drifted_claims", "Claims whose usage the last pass corrected."
        )
        self.drift = gauge(
            "reconcile_drift", "Summed absolute node drift the last pass corrected.", "resource"
        )
        self.drift_corrected = counter(
            "reconcile_drift_corrected",
            "Summed absolute node drift corrected by every pass so far.",
            "resource",
        )
        self.claims_expired = counter("reconcile_claims_expired", "Claims the sweep expired.")
        self._nodes: set[str] = set()

    def record_pass(self, report: PassReport, finished_at: datetime) -> None:
        """Publish a completed pass: the ledger's figures, the drift, the pass's own health."""
        result = report.reconciliation
        summary = report.summary
        current = {n.name for n in result.nodes}
        for gone in self._nodes - current:
            self._forget(gone)
        self._nodes = current
        for node in result.nodes:
            drift = node.drift
            for d in ALLOCATION:
                self.node_limit.labels(node.name, d).set(node.limits.get(d))
                self.node_used.labels(node.name, d).set(node.used.get(d))
                self.node_drift.labels(node.name, d).set(drift.get(d))
            self.node_demand.labels(node.name).set(node.expected_demand)
        cluster = result.cluster
        for d in ALLOCATION:
            self.cluster_total.labels(d).set(cluster.total.get(d))
            self.cluster_claimed.labels(d).set(cluster.claimed.get(d))
            self.cluster_unclaimed.labels(d).set(cluster.unclaimed_used.get(d))
            self.drift.labels(d).set(summary.drift.get(d))
            self.drift_corrected.labels(d).inc(summary.drift.get(d))
        self.drifted_nodes.set(summary.drifted_nodes)
        self.drifted_claims.set(summary.drifted_claims)
        self.claims_expired.inc(summary.claims_expired)
        self.passes.inc()
        self.last_success.set(finished_at.timestamp())
        self.last_duration.set(summary.duration_seconds)

    def record_failure(self, duration_seconds: float) -> None:
        """Count a failed pass; the gauges keep the last good pass's figures."""
        self.failures.inc()
        self.last_duration.set(duration_seconds)

    def _forget(self, node: str) -> None:
        for metric in (self.node_limit, self.node_used, self.node_drift):
            for d in ALLOCATION:
                with contextlib.suppress(KeyError):
                    metric.remove(node, d)
        with contextlib.suppress(KeyError):
            self.node_demand.remove(node)


__all__ = ["PREFIX", "ReconcilerMetrics"]
