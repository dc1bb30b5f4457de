"""Turning rows into domain values (and the other way round for the columns guards read)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from fleetgate.adapters.sql.sqltypes import instant
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
    """A ``nodes`` row as a NodeState (one conversion for a single row and for a whole read)."""
    keys = list(row.keys())
    return node_states(keys, [[row[k] for k in keys]])[0]


def node_states(keys: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[NodeState]:
    """Many ``nodes`` rows (plain tuples, columns named by ``keys``) as NodeStates.

    The same values as ``node_state``, made for reading the whole fleet (every node-snapshot
    refresh of the placement service reads 10,000 rows). Columns are looked up by position
    once, and the immutable parts that fleets repeat (a machine type's capacity and limits, the
    counters of idle nodes, timestamps written in one batch) are built once per read and shared:
    their validation is most of the cost of a node.
    """
    at = {k: i for i, k in enumerate(keys)}
    name, pool, labels, expected, schedulable = (
        at["name"], at["pool"], at["labels"], at["expected_demand"], at["schedulable"]
    )  # fmt: skip
    cap = (at["threads"], at["memory_mb"], at["disk_gb"])
    limit = tuple(at[f"limit_{d}"] for d in ALLOCATION)
    used = tuple(at[f"used_{d}"] for d in ALLOCATION)
    load, threads, updated, metrics_at = (
        at["cpu_load_1"], at["cpu_schedulable"], at["updated_at"], at["metrics_at"]
    )  # fmt: skip
    capacities: dict[tuple[int, int, int], Capacity] = {}
    amounts: dict[tuple[int, int, int], Resources] = {}
    metrics: dict[tuple[float | None, int | None], NodeMetrics] = {}
    instants: dict[float, datetime] = {}

    def shared_resources(key: tuple[int, int, int]) -> Resources:
        value = amounts.get(key)
        if value is None:
            value = amounts[key] = Resources(*key)
        return value

    def shared_instant(seconds: float) -> datetime:
        value = instants.get(seconds)
        if value is None:
            value = instants[seconds] = instant(seconds)
        return value

    out = []
    for r in rows:
        c = (int(r[cap[0]]), int(r[cap[1]]), int(r[cap[2]]))
        capacity = capacities.get(c)
        if capacity is None:
            capacity = capacities[c] = Capacity(*c)
        m_load, m_threads = r[load], r[threads]
        m = (
            None if m_load is None else float(m_load),
            None if m_threads is None else int(m_threads),
        )
        node_metrics = metrics.get(m)
        if node_metrics is None:
            node_metrics = metrics[m] = NodeMetrics(*m)
        seen = r[metrics_at]
        out.append(
            NodeState(
                name=r[name],
                pool=r[pool],
                labels=dict(r[labels] or {}),  # a copy each: NodeState's labels are a dict
                capacity=capacity,
                limits=shared_resources((int(r[limit[0]]), int(r[limit[1]]), int(r[limit[2]]))),
                used=shared_resources((int(r[used[0]]), int(r[used[1]]), int(r[used[2]]))),
                expected_demand=float(r[expected]),
                metrics=node_metrics,
                schedulable=bool(r[schedulable]),
                updated_at=shared_instant(r[updated]),
                metrics_at=None if seen is None else shared_instant(seen),
            )
        )
    return out


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
