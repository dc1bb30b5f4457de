"""The reconciler's Prometheus series, prefixed ``fleetgate_capacity_`` (capacity spec 11.2).

Gauges describe the ledger as the last successful pass left it; counters and the last-success
time describe the reconciler itself. A node that has left the ledger has its series removed on
the next pass, so dashboards never show a departed node's last figures as current.

Prometheus names a series for its base unit, so every per-resource family has a ``_bytes``
sibling with ``resource="memory"`` and ``resource="disk"`` in bytes (the ledger's MB and GB are
binary: MiB and GiB, as ``fleetgate up``'s fleet and the examples use them). The families with a
``resource`` label keep ``cpus`` (a count, no unit) and, deprecated for one release, the old
``memory_mb`` and ``disk_gb`` values in MB and GB: move queries to the ``_bytes`` series.
"""

from __future__ import annotations

import contextlib
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.metrics import MetricWrapperBase

from fleetgate.domain.capacity.dimensions import ALLOCATION
from fleetgate.domain.capacity.reconcile import PassReport

PREFIX = "fleetgate_capacity_"
BYTES = {"memory_mb": ("memory", 2**20), "disk_gb": ("disk", 2**30)}
"""Each byte-valued dimension: its ``resource`` label on a ``_bytes`` series, bytes per unit."""


class PerResource:
    """A family labelled by ``resource`` and its ``_bytes`` sibling, fed together."""

    def __init__(self, family: MetricWrapperBase, in_bytes: MetricWrapperBase) -> None:
        self.family = family
        self.in_bytes = in_bytes

    def set(self, *labels: str, dimension: str, value: float) -> None:
        """Publish ``value`` (in the ledger's unit) for ``dimension`` on both families."""
        self.family.labels(*labels, dimension).set(value)  # type: ignore[attr-defined]
        if dimension in BYTES:
            name, factor = BYTES[dimension]
            self.in_bytes.labels(*labels, name).set(value * factor)  # type: ignore[attr-defined]

    def inc(self, *labels: str, dimension: str, value: float) -> None:
        """Add ``value`` (a counter) for ``dimension`` on both families."""
        self.family.labels(*labels, dimension).inc(value)  # type: ignore[attr-defined]
        if dimension in BYTES:
            name, factor = BYTES[dimension]
            self.in_bytes.labels(*labels, name).inc(value * factor)  # type: ignore[attr-defined]

    def remove(self, *labels: str) -> None:
        """Drop every resource's series for ``labels`` (a node that left)."""
        for d in ALLOCATION:
            with contextlib.suppress(KeyError):
                self.family.remove(*labels, d)
            if d in BYTES:
                with contextlib.suppress(KeyError):
                    self.in_bytes.remove(*labels, BYTES[d][0])


class ReconcilerMetrics:
    """Every reconciler series, registered on the given registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

        def gauge(name: str, doc: str, *labels: str) -> Gauge:
            return Gauge(PREFIX + name, doc, list(labels), registry=registry)

        def counter(name: str, doc: str, *labels: str) -> Counter:
            return Counter(PREFIX + name, doc, list(labels), registry=registry)

        def per_resource(
            kind: type[Gauge] | type[Counter], name: str, doc: str, *labels: str
        ) -> PerResource:
            named = [*labels, "resource"]
            return PerResource(
                kind(PREFIX + name, doc, named, registry=registry),
                kind(
                    PREFIX + name + "_bytes",
                    f"{doc} Memory and disk in bytes.",
                    named,
                    registry=registry,
                ),
            )

        self.node_limit = per_resource(Gauge, "node_limit", "A node's admission limit.", "node")
        self.node_used = per_resource(Gauge, "node_used", "A node's recomputed usage.", "node")
        self.node_demand = gauge(
            "node_expected_demand", "A node's decayed expected demand (load units).", "node"
        )
        self.node_drift = per_resource(
            Gauge,
            "node_drift",
            "Signed drift of a node's usage corrected by the last pass (recomputed - stored).",
            "node",
        )
        self.cluster_total = per_resource(Gauge, "cluster_total", "Sum of the node limits.")
        self.cluster_claimed = per_resource(
            Gauge, "cluster_claimed", "Sum of the active claims' limits."
        )
        self.cluster_unclaimed = per_resource(
            Gauge,
            "cluster_unclaimed_used",
            "Usage of unclaimed namespaces plus the claims' advisory overage.",
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
        self.drift = per_resource(
            Gauge, "reconcile_drift", "Summed absolute node drift the last pass corrected."
        )
        self.drift_corrected = per_resource(
            Counter,
            "reconcile_drift_corrected",
            "Summed absolute node drift corrected by every pass so far.",
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
                self.node_limit.set(node.name, dimension=d, value=node.limits.get(d))
                self.node_used.set(node.name, dimension=d, value=node.used.get(d))
                self.node_drift.set(node.name, dimension=d, value=drift.get(d))
            self.node_demand.labels(node.name).set(node.expected_demand)
        cluster = result.cluster
        for d in ALLOCATION:
            self.cluster_total.set(dimension=d, value=cluster.total.get(d))
            self.cluster_claimed.set(dimension=d, value=cluster.claimed.get(d))
            self.cluster_unclaimed.set(dimension=d, value=cluster.unclaimed_used.get(d))
            self.drift.set(dimension=d, value=summary.drift.get(d))
            self.drift_corrected.inc(dimension=d, value=summary.drift.get(d))
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
            metric.remove(node)
        with contextlib.suppress(KeyError):
            self.node_demand.remove(node)


__all__ = ["BYTES", "PREFIX", "PerResource", "ReconcilerMetrics"]
