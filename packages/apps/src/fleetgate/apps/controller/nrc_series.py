"""node-rotation-controller's series names over fleetgate's series (``controller.nrc_metrics``).

An operator coming from node-rotation-controller has alerts and dashboards on its
``noderotation_*`` series. With the switch on, the controller's ``/metrics`` also serves each of
them under that name, with the same labels (``nodepool``; ``outcome``, ``phase``), type and
histogram buckets. They are not a second set of metrics: at every scrape this collector reads
fleetgate's own series and renames their samples, so the two names can never disagree and
forgetting a pool drops both. docs/migrating-from-node-rotation-controller.md has the table.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from prometheus_client import CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.metrics_core import Metric

PREFIX = "noderotation_"

#: node-rotation-controller's family name per fleetgate attribute of ``RotationMetrics``
#: (counters without ``_total``, as prometheus_client names families).
NAMES: Mapping[str, str] = {
    "completed": "completed",
    "forceful": "forceful_fallback",
    "duration": "duration_seconds",
    "candidates": "candidates",
    "in_progress": "in_progress",
    "freeze_until": "freeze_until_timestamp",
    "age_threshold": "age_threshold_seconds",
    "chances": "rotation_chances",
    "period": "window_period_seconds",
    "short_lead": "short_lead_nodes",
    "drain_stuck": "drain_stuck",
    "retry_count": "retry_count",
    "policy_conflict": "policy_conflict",
    "window_active": "window_active",
    "capacity": "throughput_capacity",
    "t_rot_est": "t_rot_estimate_seconds",
    "t_rot": "t_rot_bound_seconds",
}


class NrcSeries:
    """A collector serving ``(source, name)`` pairs: each source's samples under ``name``."""

    def __init__(self, sources: Iterable[tuple[MetricWrapperBase, str]]) -> None:
        self._sources = tuple(sources)

    def register(self, registry: CollectorRegistry) -> None:
        """Serve the renamed series from ``registry`` (refused if a name is taken)."""
        registry.register(self)

    def describe(self) -> Iterator[Metric]:
        """The families, without samples (the registry checks their names are free)."""
        for source, name in self._sources:
            for family in source.describe():
                yield Metric(name, family.documentation, family.type)

    def collect(self) -> Iterator[Metric]:
        """fleetgate's samples as they are now, each under node-rotation-controller's name."""
        for source, name in self._sources:
            for family in source.collect():
                renamed = Metric(name, family.documentation, family.type)
                for sample in family.samples:
                    suffix = sample.name[len(family.name) :]
                    # Go's client does not expose creation times by default: NRC had none.
                    if suffix == "_created":
                        continue
                    renamed.add_sample(name + suffix, sample.labels, sample.value, sample.timestamp)
                yield renamed
