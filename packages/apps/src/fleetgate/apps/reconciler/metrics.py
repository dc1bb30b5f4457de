"""The reconciler's Prometheus series, prefixed ``fleetgate_capacity_`` (capacity spec 11.2).

Gauges describe the ledger as the last successful pass left it; counters and the last-success
time describe the reconciler itself. A node that has left the ledger has its series removed on
the next pass, so dashboards never show a departed node's last figures as current.

One unit per metric, as Prometheus names a series for its base unit: every per-resource figure
is published as ``<family>_cpus`` (vCPUs, no ``resource`` label) and ``<family>_bytes`` with
``resource="memory"`` or ``resource="disk"`` in bytes (the ledger's MB and GB are binary: MiB and
GiB, as ``fleetgate up``'s fleet and the examples use them).

The old mixed family ``<family>{resource="cpus"|"memory_mb"|"disk_gb"}`` (vCPUs, MB and GB in
one metric) is still exported as an alias for one release, its HELP text saying so; it is removed
in ``ALIASES_REMOVED_IN`` (docs/decisions.md, "Deprecated metric names").
"""

from __future__ import annotations

import contextlib
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.metrics import MetricWrapperBase

from fleetgate.domain.capacity.dimensions import ALLOCATION
from fleetgate.domain.capacity.reconcile import PassReport

PREFIX = "fleetgate_capacity_"
BYTES = {"memory_mb": ("memory", 2**20), "disk_gb": ("disk", 2**30)}
"""Each byte-valued dimension: its ``resource`` label on a ``_bytes`` series, bytes per unit."""
ALIASES_REMOVED_IN = "0.2.0"
"""The release that drops the deprecated mixed-unit families (and the controller's old names)."""


def deprecated(doc: str, replacement: str) -> str:
    """The HELP text of a deprecated alias: what it was, what replaces it, when it goes."""
    return f"DEPRECATED, removed in fleetgate {ALIASES_REMOVED_IN}: use {replacement}. {doc}"


class PerResource:
    """One figure per resource, fed together into its ``_cpus`` and ``_bytes`` families and the
    deprecated mixed-unit alias."""

    def __init__(
        self, cpus: MetricWrapperBase, in_bytes: MetricWrapperBase, alias: MetricWrapperBase
    ) -> None:
        self.cpus = cpus
        self.in_bytes = in_bytes
        self.family = alias

    def _targets(self, labels: tuple[str, ...], dimension: str) -> list[tuple[Any, float]]:
        """(child, factor) for each series that carries ``dimension``."""
        out: list[tuple[Any, float]] = [(self.family.labels(*labels, dimension), 1.0)]
        if dimension in BYTES:
            name, factor = BYTES[dimension]
            out.append((self.in_bytes.labels(*labels, name), float(factor)))
        else:
            # A cluster-wide family has no label at all: the metric is its own only series.
            out.append((self.cpus.labels(*labels) if labels else self.cpus, 1.0))
        return out

    def set(self, *labels: str, dimension: str, value: float) -> None:
        """Publish ``value`` (in the ledger's unit) for ``dimension`` on every family."""
        for child, factor in self._targets(labels, dimension):
            child.set(value * factor)

    def inc(self, *labels: str, dimension: str, value: float) -> None:
        """Add ``value`` (a counter) for ``dimension`` on every family."""
        for child, factor in self._targets(labels, dimension):
            child.inc(value * factor)

    def remove(self, *labels: str) -> None:
        """Drop every resource's series for ``labels`` (a node that left)."""
        if labels:
            with contextlib.suppress(KeyError):
                self.cpus.remove(*labels)
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
                kind(PREFIX + name + "_cpus", f"{doc} In vCPUs.", list(labels), registry=registry),
                kind(
                    PREFIX + name + "_bytes",
                    f"{doc} Memory and disk in bytes.",
                    named,
                    registry=registry,
                ),
                kind(
                    PREFIX + name,
                    deprecated(doc, f"{PREFIX}{name}_cpus and {PREFIX}{name}_bytes"),
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


__all__ = [
    "ALIASES_REMOVED_IN",
    "BYTES",
    "PREFIX",
    "PerResource",
    "ReconcilerMetrics",
    "deprecated",
]
