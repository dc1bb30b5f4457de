"""The values the capacity ledger takes and returns: nodes, requests, placements, outcomes."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fleetgate.domain.capacity.denials import Denial, DimensionDetail
from fleetgate.domain.capacity.dimensions import Capacity, Resources

# The names are checked by one rule each, kept in a light module (the client checks them too);
# re-exported here, where the ledger's values have always been read from.
from fleetgate.domain.capacity.names import MAX_POOL as MAX_POOL
from fleetgate.domain.capacity.names import check_namespace as check_namespace
from fleetgate.domain.capacity.names import check_node_name as check_node_name
from fleetgate.domain.capacity.names import check_request_id as check_request_id
from fleetgate.domain.events import Event


def _check_real(field_name: str, value: object, *, minimum: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{field_name}: must be a finite number, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{field_name}: must be at least {minimum}, got {value}")
    return float(value)


@dataclass(frozen=True)
class NodeSpec:
    """A node as an operator (or the cluster) declares it: its name, pool, labels and capacity."""

    name: str
    capacity: Capacity
    pool: str = ""
    labels: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_node_name(self.name)
        if not isinstance(self.pool, str) or len(self.pool) > MAX_POOL:
            raise ValueError(f"pool: must be a string of at most {MAX_POOL} characters")
        if not isinstance(self.labels, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in self.labels.items()
        ):
            raise ValueError("labels: must map strings to strings")


@dataclass(frozen=True)
class NodeMetrics:
    """What a node publishes: 1-minute load and schedulable threads (either may be unknown)."""

    cpu_load_1: float | None = None
    cpu_schedulable: int | None = None

    def __post_init__(self) -> None:
        if self.cpu_load_1 is not None:
            _check_real("cpu_load_1", self.cpu_load_1, minimum=0.0)
        if self.cpu_schedulable is not None and (
            isinstance(self.cpu_schedulable, bool)
            or not isinstance(self.cpu_schedulable, int)
            or self.cpu_schedulable < 0
        ):
            raise ValueError(
                f"cpu_schedulable: must be a non-negative integer, got {self.cpu_schedulable!r}"
            )


@dataclass(frozen=True)
class NodeState:
    """A node's row in the ledger: capacity, limits, used counters, demand, metrics, schedulable."""

    name: str
    pool: str
    labels: dict[str, str]
    capacity: Capacity
    limits: Resources
    used: Resources
    expected_demand: float
    metrics: NodeMetrics
    schedulable: bool
    updated_at: datetime
    metrics_at: datetime | None = None

    def guard_row(self) -> dict[str, object]:
        """The node as the named columns the guards are written over."""
        row: dict[str, object] = {
            "expected_demand": self.expected_demand,
            "cpu_load_1": self.metrics.cpu_load_1,
            "cpu_schedulable": self.metrics.cpu_schedulable,
            "schedulable": self.schedulable,
        }
        for d, v in self.limits.as_dict().items():
            row[f"limit_{d}"] = v
        for d, v in self.used.as_dict().items():
            row[f"used_{d}"] = v
        return row


@dataclass(frozen=True)
class ClusterState:
    """The singleton cluster row: Σ node limits, Σ active claim limits, unclaimed usage."""

    total: Resources
    claimed: Resources
    unclaimed_used: Resources
    updated_at: datetime

    def guard_row(self) -> dict[str, object]:
        """The cluster as the named columns the cluster guard is written over."""
        row: dict[str, object] = {}
        for prefix, res in (
            ("total_", self.total),
            ("claimed_", self.claimed),
            ("unclaimed_used_", self.unclaimed_used),
        ):
            for d, v in res.as_dict().items():
                row[prefix + d] = v
        return row


@dataclass(frozen=True)
class PlacementRequest:
    """What a caller asks the placement service for: a size in a namespace, placed anywhere fit.

    ``node`` forces one node (a one-candidate walk); ``pool`` restricts candidates to a pool.
    ``request_id`` makes the request idempotent within its namespace. ``enforce=False`` records
    the placement even where a guard refuses (ground-truth writes, reported loudly).
    """

    namespace: str
    resources: Resources
    request_id: str | None = None
    node: str | None = None
    pool: str | None = None
    enforce: bool = True

    def __post_init__(self) -> None:
        check_namespace(self.namespace)
        if not isinstance(self.resources, Resources):
            raise ValueError("resources: must be a Resources value")
        check_request_id(self.request_id)
        if self.node is not None:
            check_node_name(self.node, "node")
        if self.pool is not None and (not isinstance(self.pool, str) or len(self.pool) > MAX_POOL):
            raise ValueError(f"pool: must be a string of at most {MAX_POOL} characters")


@dataclass(frozen=True)
class AdmitRequest:
    """One guarded admission of ``resources`` for ``namespace`` onto ``node``.

    ``demand`` is the charge added to the node's expected demand; ``target_load`` the demand
    clause's budget factor (``0`` waives the clause). ``enforce=False`` records the placement even
    where a guard would refuse (a ground-truth write; the bypassed refusal is reported).
    ``request_id`` makes the request idempotent within its namespace.
    """

    namespace: str
    node: str
    resources: Resources
    demand: float = 0.0
    target_load: float = 0.0
    enforce: bool = True
    request_id: str | None = None
    placement_id: str | None = None

    def __post_init__(self) -> None:
        check_namespace(self.namespace)
        check_node_name(self.node, "node")
        if not isinstance(self.resources, Resources):
            raise ValueError("resources: must be a Resources value")
        _check_real("demand", self.demand, minimum=0.0)
        _check_real("target_load", self.target_load)
        check_request_id(self.request_id)

    def guard_params(self) -> dict[str, float | int]:
        """The request as the named parameters the guards are written over."""
        params: dict[str, float | int] = dict(self.resources.as_dict())
        params["demand"] = self.demand
        params["target_load"] = self.target_load
        return params


@dataclass(frozen=True)
class MoveRequest:
    """Move placement ``placement_id`` to ``node``: the node side only, both rows in name order.

    The target node is charged a fresh ``demand`` (the workload starts there); the old node is
    credited what is left of the placement's previous charge.
    """

    placement_id: str
    node: str
    demand: float = 0.0
    target_load: float = 0.0
    enforce: bool = True
    namespace: str | None = None

    def __post_init__(self) -> None:
        check_node_name(self.node, "node")
        _check_real("demand", self.demand, minimum=0.0)
        _check_real("target_load", self.target_load)
        if self.namespace is not None:
            check_namespace(self.namespace)


@dataclass(frozen=True)
class Placement:
    """One admitted placement: the ground truth every counter is recomputed from."""

    id: str
    namespace: str
    node: str
    resources: Resources
    demand: float
    admitted_at: datetime
    request_id: str | None = None
    claim_id: str | None = None


@dataclass(frozen=True)
class Admission:
    """The outcome of an admission (or a move).

    Exactly one of ``placement`` and ``denial`` is set. ``replayed`` means the request id had
    already been admitted and nothing new was charged. ``node`` is the node's row after the
    charge. ``claim_id`` names the claim charged (``None``: the cluster's unclaimed side).
    ``claim_over_limit`` lists the dimensions an advisory claim went over. ``bypassed`` holds the
    refusals, stage by stage, that an ``enforce=False`` admission overrode.
    """

    placement: Placement | None = None
    denial: Denial | None = None
    replayed: bool = False
    node: NodeState | None = None
    claim_id: str | None = None
    claim_over_limit: tuple[DimensionDetail, ...] = ()
    bypassed: tuple[Denial, ...] = ()

    @property
    def admitted(self) -> bool:
        """True when a placement was (or had already been) recorded."""
        return self.placement is not None


@dataclass(frozen=True)
class Release:
    """The outcome of a release: ``released`` is false when the placement was already gone.

    ``clamped`` is set when a counter would have gone negative and was floored at zero (a sign of
    drift the reconciler will correct); ``demand_credit`` is what was taken off expected demand.
    """

    released: bool
    placement: Placement | None = None
    clamped: bool = False
    demand_credit: float = 0.0


@dataclass(frozen=True)
class RecordedEvent:
    """An event as stored in the audit trail, with its position in it."""

    id: int
    event: Event

    def as_dict(self) -> dict[str, Any]:
        """The wire form."""
        ev = self.event
        return {
            "id": self.id,
            "at": ev.at.isoformat(),
            "kind": ev.kind,
            "subject": ev.subject,
            "namespace": ev.namespace,
            "level": ev.level.value,
            "data": ev.data,
        }


def replay_mismatch(placement: Placement, request: PlacementRequest) -> tuple[str, ...]:
    """The fields in which ``request`` differs from the placement its ``request_id`` made.

    A request id is an idempotency key: repeating it replays the first answer only when the
    request is the same one. Compared is what the placement records (the size, and the node when
    the request forces one); an empty answer means the replay is that request's answer.
    """
    differ = [
        name
        for name in ("cpus", "memory_mb", "disk_gb")
        if getattr(placement.resources, name) != getattr(request.resources, name)
    ]
    if request.node is not None and request.node != placement.node:
        differ.append("node")
    return tuple(differ)
