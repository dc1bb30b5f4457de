"""The columns of each kind of row the client commands print (``table`` and, with more, ``wide``)
and the identifier ``-o name`` prints: the id a later command takes (release, claims update...).

Rows are the client's bodies (``clientbodies``); they are read by attribute only, so this module
needs none of them imported.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from fleetgate.apps.clientoutput import Column, View


def _used(dimension: str) -> Any:
    return lambda r: f"{getattr(r.used, dimension)}/{getattr(r.limits, dimension)}"


def _claimed(dimension: str, limit: str) -> Any:
    return lambda r: f"{getattr(r.used, dimension)}/{getattr(r, limit)}"


def _iso(field: str) -> Any:
    def cell(r: Any) -> str | None:
        at: datetime | None = getattr(r, field)
        return None if at is None else at.isoformat()

    return cell


def when(at: datetime | None) -> str | None:
    """A window edge as people read it (minutes, with the zone)."""
    return None if at is None else at.strftime("%Y-%m-%dT%H:%M%Z")


def _labels(r: Any) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(r.labels.items()))


NODES = View(
    columns=(
        Column("NAME", lambda r: r.name),
        Column("POOL", lambda r: r.pool),
        Column("CPUS", _used("cpus")),
        Column("MEMORY_MB", _used("memory_mb")),
        Column("DISK_GB", _used("disk_gb")),
        Column("LOAD", lambda r: r.cpu_load_1),
        Column("DEMAND", lambda r: f"{r.expected_demand:.2f}"),
        Column("SCHEDULABLE", lambda r: "yes" if r.schedulable else "cordoned"),
        Column("THREADS", lambda r: r.threads, wide=True),
        Column("LABELS", _labels, wide=True),
        Column("UPDATED", _iso("updated_at"), wide=True),
    ),
    name=lambda r: str(r.name),
)

PLACEMENTS = View(
    columns=(
        Column("ID", lambda r: r.id),
        Column("NODE", lambda r: r.node),
        Column("CPUS", lambda r: r.cpus),
        Column("MEMORY_MB", lambda r: r.memory_mb),
        Column("DISK_GB", lambda r: r.disk_gb),
        Column("REQUEST_ID", lambda r: r.request_id),
        Column("ADMITTED", _iso("admitted_at")),
        Column("NAMESPACE", lambda r: r.namespace, wide=True),
        Column("CLAIM", lambda r: r.claim_id, wide=True),
    ),
    name=lambda r: str(r.id),
)

#: What ``fleetgate place --dry-run`` answers: where it would land, and who refused first.
DRY_RUN = View(
    columns=(
        Column("NODE", lambda r: r.node),
        Column("CPUS", lambda r: r.cpus),
        Column("MEMORY_MB", lambda r: r.memory_mb),
        Column("DISK_GB", lambda r: r.disk_gb),
        Column("DEMAND_WAIVED", lambda r: r.demand_waived),
        Column("OVER_CLAIM", lambda r: r.over_claim),
        Column("REFUSED_FIRST", lambda r: ",".join(c.node for c in r.refused), wide=True),
    ),
    name=lambda r: str(r.node),
)

CLAIMS = View(
    columns=(
        Column("ID", lambda r: r.id),
        Column("STATE", lambda r: r.state),
        Column("CPUS", _claimed("cpus", "cpus")),
        Column("MEMORY_MB", _claimed("memory_mb", "memory_mb")),
        Column("DISK_GB", _claimed("disk_gb", "disk_gb")),
        Column("EXPIRES", _iso("expires_at")),
        Column("NAMESPACE", lambda r: r.namespace, wide=True),
        Column(
            "OVERAGE",
            lambda r: f"{r.overage.cpus}/{r.overage.memory_mb}/{r.overage.disk_gb}",
            wide=True,
        ),
        Column("CREATED", _iso("created_at"), wide=True),
    ),
    name=lambda r: str(r.id),
)

EVENTS = View(
    columns=(
        Column("ID", lambda r: r.id),
        Column("AT", _iso("at")),
        Column("LEVEL", lambda r: r.level),
        Column("NAMESPACE", lambda r: r.namespace),
        Column("KIND", lambda r: r.kind),
        Column("SUBJECT", lambda r: r.subject),
        Column("DATA", lambda r: json.dumps(r.data, sort_keys=True) if r.data else None, wide=True),
    ),
    name=lambda r: str(r.id),
)


def ledger_hold(hold: Any) -> str | None:
    """Gate 9's hold in one cell: the node, what would be stranded, what is missing."""
    if not hold:
        return None
    missing = ",".join(f"{d}={v}" for d, v in (hold.get("missing") or {}).items() if v)
    stranded = f"{hold.get('stranded')}/{hold.get('placements')} stranded"
    return f"{hold.get('node')}: {stranded}" + (f", missing {missing}" if missing else "")


STATUS = View(
    columns=(
        Column("POOL", lambda r: r.pool),
        Column("POLICY", lambda r: r.policy or r.governance),
        Column("NODES", lambda r: r.nodes),
        Column("WINDOW", lambda r: "open" if r.window_open else "closed"),
        Column("NEXT_WINDOW", lambda r: when(r.next_window_start)),
        Column("A", lambda r: r.age_threshold),
        Column("G", lambda r: r.guaranteed_chances),
        Column("ROTATING", lambda r: r.rotating),
        Column("REASON", lambda r: r.reason),
        Column("WINDOW_END", lambda r: when(r.next_window_end), wide=True),
        Column("C", lambda r: r.throughput_capacity, wide=True),
        Column("GATE_UNTIL", _iso("gate_until"), wide=True),
        Column("LEDGER_HOLD", lambda r: ledger_hold(r.ledger_hold), wide=True),
        Column("FINDINGS", lambda r: ",".join(r.findings), wide=True),
    ),
    name=lambda r: str(r.pool),
)

TOKENS = View(
    columns=(
        Column("ID", lambda r: r.id),
        Column("NAMESPACE", lambda r: r.namespace),
        Column("ACTIVE", lambda r: r.active),
        Column("CREATED", _iso("created_at")),
        Column("REVOKED", _iso("revoked_at")),
    ),
    name=lambda r: str(r.id),
)

#: A token just made: the secret is shown (this once) in every format but ``name``.
NEW_TOKEN = View(
    columns=(
        Column("ID", lambda r: r.id),
        Column("NAMESPACE", lambda r: r.namespace),
        Column("SECRET", lambda r: r.secret),
    ),
    name=lambda r: str(r.id),
)
