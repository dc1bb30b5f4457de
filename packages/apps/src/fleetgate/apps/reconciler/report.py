"""A reconcile pass as the operator reads it: rich tables for ``fleetgate reconciler --once``."""

from __future__ import annotations

from rich.console import Console, Group
from rich.table import Table

from fleetgate.domain.capacity.dimensions import ALLOCATION, Resources
from fleetgate.domain.capacity.reconcile import Drift, PassReport


def _triple(value: Resources) -> str:
    return " / ".join(str(value.get(d)) for d in ALLOCATION)


def _drift(value: Drift) -> str:
    if value.is_zero():
        return "0"
    return " / ".join(f"{value.get(d):+d}" for d in ALLOCATION)


def summary_table(report: PassReport) -> Table:
    """The pass in one table: counts, drift, expiry, duration."""
    s = report.summary
    table = Table(title="capacity reconcile pass", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("nodes", str(s.nodes))
    table.add_row("drifted nodes", str(s.drifted_nodes))
    for d in ALLOCATION:
        table.add_row(f"drift {d} (sum of |drift|)", str(s.drift.get(d)))
    table.add_row("drifted claims", str(s.drifted_claims))
    table.add_row("cluster row drifted", "yes" if s.cluster_drifted else "no")
    table.add_row("placements re-attributed", str(s.reattributed))
    table.add_row("claims expired", str(s.claims_expired))
    table.add_row("duration", f"{s.duration_seconds * 1000:.1f} ms")
    return table


def nodes_table(report: PassReport) -> Table:
    """Each node's limits, recomputed usage, signed drift and expected demand."""
    table = Table(title="nodes (cpus / memory_mb / disk_gb)")
    for header in ("node", "limit", "used", "drift", "expected demand"):
        table.add_column(header, justify="left" if header == "node" else "right")
    for n in report.reconciliation.nodes:
        demand = f"{n.stored_expected_demand:.2f} -> {n.expected_demand:.2f}"
        style = None if n.drift.is_zero() else "bold red"
        table.add_row(
            n.name, _triple(n.limits), _triple(n.used), _drift(n.drift), demand, style=style
        )
    return table


def cluster_table(report: PassReport) -> Table:
    """The cluster row after the pass, with what the pass corrected in it."""
    c = report.reconciliation.cluster
    table = Table(title="cluster (cpus / memory_mb / disk_gb)")
    for header in ("", "value", "drift"):
        table.add_column(header, justify="right" if header else "left")
    drift = c.drift
    table.add_row("total", _triple(c.total), _drift(drift["total"]))
    table.add_row("claimed", _triple(c.claimed), _drift(drift["claimed"]))
    table.add_row("unclaimed used", _triple(c.unclaimed_used), _drift(drift["unclaimed_used"]))
    return table


def claims_table(report: PassReport) -> Table | None:
    """Claims the pass corrected or expired; None when there were none."""
    result = report.reconciliation
    rows = [
        (c.id, c.namespace, _drift(c.drift), "") for c in result.claims if not c.drift.is_zero()
    ]
    rows += [(c.id, c.namespace, "", "expired") for c in result.expired]
    if not rows:
        return None
    table = Table(title="claims")
    for header in ("claim", "namespace", "drift", "sweep"):
        table.add_column(header)
    for row in rows:
        table.add_row(*row)
    return table


def render(report: PassReport, console: Console) -> None:
    """Print the whole report."""
    parts: list[Table] = [summary_table(report), cluster_table(report)]
    if report.reconciliation.nodes:
        parts.append(nodes_table(report))
    claims = claims_table(report)
    if claims is not None:
        parts.append(claims)
    console.print(Group(*parts))


__all__ = ["claims_table", "cluster_table", "nodes_table", "render", "summary_table"]
