"""The controller's Prometheus series (spec §8.1, prefixed ``fleetgate_rotation_``).

Names follow Prometheus conventions (instants end in ``_timestamp_seconds``, no stutter); the two
older names (``freeze_until_timestamp``, ``rotation_chances``) are still exported, deprecated,
for one release so dashboards and alerts can move over; they go in ``ALIASES_REMOVED_IN``, with
the capacity families' mixed-unit aliases.

Every series carries the ``nodepool`` label. Gauges are recomputed from each pass's report; all
series of a pool are dropped when it disappears or stops being governed (a conflicted pool keeps
only ``policy_conflict = 1``). With ``nrc_names`` node-rotation-controller's names are served
beside them, read from the same series (``nrc_series``).
"""

from __future__ import annotations

import contextlib
import math

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from fleetgate.apps.controller.nrc_series import NAMES as NRC_NAMES
from fleetgate.apps.controller.nrc_series import PREFIX as PREFIX_NRC
from fleetgate.apps.controller.nrc_series import NrcSeries
from fleetgate.apps.reconciler.metrics import deprecated
from fleetgate.domain.capacity.dimensions import Resources
from fleetgate.domain.rotation.governance import Status
from fleetgate.domain.rotation.machine import PoolReport

PREFIX = "fleetgate_rotation_"
BUCKETS = tuple(30.0 * 2**i for i in range(10))


class RotationMetrics:
    """All rotation series, registered on the given registry."""

    def __init__(self, registry: CollectorRegistry, *, nrc_names: bool = False) -> None:
        def gauge(name: str, doc: str, *labels: str) -> Gauge:
            return Gauge(PREFIX + name, doc, ["nodepool", *labels], registry=registry)

        self.completed = Counter(
            PREFIX + "completed",
            "Rotations ended, by outcome.",
            ["nodepool", "outcome"],
            registry=registry,
        )
        self.forceful = Counter(
            PREFIX + "forceful_fallback",
            "Surge-less rotations started.",
            ["nodepool"],
            registry=registry,
        )
        self.duration = Histogram(
            PREFIX + "duration_seconds",
            "Rotation phase durations.",
            ["nodepool", "phase"],
            buckets=BUCKETS,
            registry=registry,
        )
        self.candidates = gauge("candidates", "Eligible NodeClaims.")
        self.in_progress = gauge("in_progress", "1 while a rotation is anchored.")
        self.window_active = gauge("window_active", "1 while a maintenance window is open.")
        self.policy_conflict = gauge("policy_conflict", "1 when policies conflict for the pool.")
        self.freeze_until = gauge("freeze_until_timestamp_seconds", "Freeze end (unix s) or 0.")
        self.age_threshold = gauge("age_threshold_seconds", "Age threshold A.")
        self.chances = gauge("guaranteed_chances", "Guaranteed chances G.")
        self.capacity = gauge("throughput_capacity", "Rotations per shortest window, C.")
        self.t_rot_est = gauge("t_rot_estimate_seconds", "Forecast rotation time t_rot_est.")
        self.t_rot = gauge("t_rot_bound_seconds", "Deadline bound t_rot.")
        self.period = gauge("window_period_seconds", "Worst-case window period P.")
        self.short_lead = gauge("short_lead_nodes", "Claims whose life is within the lead time.")
        self.drain_stuck = gauge("drain_stuck", "1 when the drain outlived its bound.")
        self.retry_count = gauge("retry_count", "Highest retry count among the pool's claims.")
        self.ledger_held = gauge(
            "ledger_held",
            "1 while gate 9 holds a node (its start or its drain): its ledger placements would "
            "not fit elsewhere.",
        )
        self.ledger_hold_expiry = gauge(
            "ledger_hold_expires_in_seconds",
            "Seconds until the held node's forced expiry, when Karpenter drains it held or not "
            "(0 while not held; +Inf when it never expires).",
        )
        # One unit per metric (decisions.md 20): vCPUs apart from bytes.
        self.ledger_missing_cpus = gauge(
            "ledger_missing_cpus", "vCPUs the held node's placements lack (0: not held)."
        )
        self.ledger_missing_bytes = gauge(
            "ledger_missing_bytes",
            "Memory or disk bytes the held node's placements lack (0: not held).",
            "resource",
        )
        self.observed = gauge(
            "observed_seconds", "Moving estimate of observed durations.", "estimate"
        )
        self.configured = gauge(
            "estimate_seconds", "The estimate the policy resolves to.", "estimate"
        )
        self.disagreement = gauge(
            "estimate_disagreement",
            "1 when the estimate is off by more than 2x from observation.",
            "estimate",
        )
        # The names before the Prometheus-convention renames, kept for one release (deprecated:
        # removed in the next minor release; docs/operator-guide.md lists them).
        self._aliases = {
            self.freeze_until: gauge(
                "freeze_until_timestamp",
                deprecated("Freeze end (unix s) or 0.", PREFIX + "freeze_until_timestamp_seconds"),
            ),
            self.chances: gauge(
                "rotation_chances",
                deprecated("Guaranteed chances G.", PREFIX + "guaranteed_chances"),
            ),
        }
        if nrc_names:  # node-rotation-controller's names, read from these very series
            NrcSeries(
                (getattr(self, attr), PREFIX_NRC + name) for attr, name in NRC_NAMES.items()
            ).register(registry)
        self._series: dict[str, set[tuple[object, tuple[str, ...]]]] = {}
        # Per pool, the gauge values last set: a pass that changes none of them sets nothing
        # (most passes of a long simulation; each set is a label look-up and a lock).
        self._gauges: dict[str, list[tuple[Gauge, float, tuple[str, ...]]]] = {}

    def _set(self, metric: Gauge, pool: str, value: float, *labels: str) -> None:
        for target in (metric, self._aliases.get(metric)):
            if target is not None:
                target.labels(pool, *labels).set(value)
                self._series.setdefault(pool, set()).add((target, labels))

    def count_completion(self, pool: str, outcome: str) -> None:
        """completed_total{outcome} + 1."""
        self.completed.labels(pool, outcome).inc()
        self._series.setdefault(pool, set()).add((self.completed, (outcome,)))

    def count_forceful(self, pool: str) -> None:
        """forceful_fallback_total + 1."""
        self.forceful.labels(pool).inc()
        self._series.setdefault(pool, set()).add((self.forceful, ()))

    def observe(self, pool: str, phase: str, seconds: float) -> None:
        """A phase duration into the histogram."""
        self.duration.labels(pool, phase).observe(seconds)
        self._series.setdefault(pool, set()).add((self.duration, (phase,)))

    def forget(self, pool: str) -> None:
        """Drop every series of ``pool``."""
        self._gauges.pop(pool, None)
        for metric, labels in self._series.pop(pool, set()):
            with contextlib.suppress(KeyError):
                metric.remove(pool, *labels)  # type: ignore[attr-defined]

    def apply(self, report: PoolReport) -> None:
        """Recompute the pool's gauges from one pass's report."""
        pool = report.pool
        if not report.governance.governed:
            self.forget(pool)
            if report.governance.status is Status.CONFLICT:
                self._set(self.policy_conflict, pool, 1)
            return
        d = report.derivation
        values: list[tuple[Gauge, float, tuple[str, ...]]] = [
            (self.policy_conflict, 0, ()),
            (self.in_progress, 1 if report.anchor else 0, ()),
            (self.window_active, 1 if report.window_active else 0, ()),
            (self.freeze_until, report.freeze_until.timestamp() if report.freeze_until else 0, ()),
            (self.candidates, report.census.eligible if report.census else 0, ()),
            (self.short_lead, len(report.short_lead), ()),
            (self.drain_stuck, 1 if report.drain_stuck else 0, ()),
            (self.retry_count, report.retry_count, ()),
        ]
        values += _ledger_values(self, report)
        if d is not None:
            values += [
                (self.age_threshold, d.age_threshold.total_seconds(), ()),
                (self.chances, d.guaranteed_chances, ()),
                (self.capacity, d.capacity, ()),
                (self.t_rot_est, d.t_rot_est.total_seconds(), ()),
                (self.t_rot, d.t_rot.total_seconds(), ()),
                (self.period, d.inputs.period.total_seconds(), ()),
            ]
        for check in report.estimates:
            values += [
                (self.observed, check.observed.total_seconds(), (check.kind,)),
                (self.configured, check.configured.total_seconds(), (check.kind,)),
                (self.disagreement, 1 if check.disagrees else 0, (check.kind,)),
            ]
        before = self._gauges.get(pool)
        if before == values:
            return
        self._gauges[pool] = values
        if before is not None and len(before) == len(values):
            # The same gauges as last pass: set only those whose value moved (during a
            # rotation, one or two of twenty).
            for old, new in zip(before, values, strict=True):
                if old != new:
                    self._set(new[0], pool, new[1], *new[2])
            return
        for metric, value, labels in values:
            self._set(metric, pool, value, *labels)


def _ledger_values(
    m: RotationMetrics, report: PoolReport
) -> list[tuple[Gauge, float, tuple[str, ...]]]:
    """Gate 9's gauges: held, the time left to the held node's forced expiry, and the shortfall
    per dimension (zero while not held)."""
    hold = report.ledger_hold
    short = Resources() if hold is None else hold.verdict.shortfall()
    left = 0.0 if hold is None else math.inf
    if hold is not None and hold.time_left is not None:
        left = hold.time_left.total_seconds()
    return [
        (m.ledger_held, 0 if hold is None else 1, ()),
        (m.ledger_hold_expiry, left, ()),
        (m.ledger_missing_cpus, short.cpus, ()),
        # The ledger's MB and GB are MiB and GiB.
        (m.ledger_missing_bytes, short.memory_mb * 2**20, ("memory",)),
        (m.ledger_missing_bytes, short.disk_gb * 2**30, ("disk",)),
    ]
