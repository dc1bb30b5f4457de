"""Turning rows into domain values (and the other way round for the columns guards read)."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from fleetgate.adapters.sql.sqltypes import instant, maybe_instant
from fleetgate.domain.capacity.dimensions import ALLOCATION, Capacity, Resources
from fleetgate.domain.capacity.model import ClusterState, NodeMetrics, NodeState, Placement

Row = Mapping[Any, Any]


def resources(row: Row, prefix: str = "") -> Resources:
    """The three allocation columns ``{prefix}cpus`` etc. as Resources."""
    return Resources(*(int(row[f"{prefix}{d}"]) for d in ALLOCATION))


def guard_row(row: Row) -> dict[str, object]:
    """A row as the plain mapping the domain's guard evaluator reads (floats, not Decimals)."""
    return {
        str(key): float(value) if isinstance(value, Decimal) else value
        for key, value in row.items()
    }


def node_state(row: Row) -> NodeState:
    """A ``nodes`` row as a NodeState."""
    load = row["cpu_load_1"]
    schedulable_threads = row["cpu_schedulable"]
    return NodeState(
        name=row["name"],
        pool=row["pool"],
        labels=dict(row["labels"] or {}),
        capacity=Capacity(int(row["threads"]), int(row["memory_mb"]), int(row["disk_gb"])),
        limits=resources(row, "limit_"),
        used=resources(row, "used_"),
        expected_demand=float(row["expected_demand"]),
        metrics=NodeMetrics(
            cpu_load_1=None if load is None else float(load),
            cpu_schedulable=None if schedulable_threads is None else int(schedulable_threads),
        ),
        schedulable=bool(row["schedulable"]),
        updated_at=instant(row["updated_at"]),
        metrics_at=maybe_instant(row["metrics_at"]),
    )


def placement(row: Row) -> Placement:
    """A ``placements`` row as a Placement."""
    return Placement(
        id=row["id"],
        namespace=row["namespace"],
        node=row["node"],
        resources=resources(row),
        demand=float(row["demand"]),
        admitted_at=instant(row["admitted_at"]),
        request_id=row["request_id"],
        claim_id=row["claim_id"],
    )


def cluster_state(row: Row) -> ClusterState:
    """The ``cluster`` row as a ClusterState."""
    return ClusterState(
        total=resources(row, "total_"),
        claimed=resources(row, "claimed_"),
        unclaimed_used=resources(row, "unclaimed_used_"),
        updated_at=instant(row["updated_at"]),
    )
