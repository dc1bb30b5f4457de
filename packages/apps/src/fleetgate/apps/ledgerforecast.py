"""``fleetgate check --ledger URL | --ledger-snapshot FILE``: each pool's headroom against its
largest node's placements (finding ``LedgerHeadroom``; the judgement is the domain's,
``capacity.headroom``).

The ledger is read, never written, and never migrated (``migrate: false``). A snapshot file
describes the same thing by hand, limits as the ledger holds them (after overcommit)::

    nodes:
      - {name: n-1, pool: general, cpus: 24, memoryMb: 32768, diskGb: 100}
      - {name: n-2, pool: general, cpus: 12, memoryMb: 16384, diskGb: 100, schedulable: false}
    placements:            # count: that many alike (default 1)
      - {node: n-1, namespace: team, cpus: 4, memoryMb: 1024, diskGb: 5, count: 5}
    claims:                # active claims (optional)
      - {namespace: team, cpus: 40, memoryMb: 40960, diskGb: 200}

Each node's usage is the sum of its placements; the cluster row is derived as the ledger keeps
it (the total from the limits, the claimed from the claims, the unclaimed usage from the
namespaces without one).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.errors import LedgerError
from fleetgate.domain.capacity.headroom import LEDGER_HEADROOM, PoolHeadroom, headroom
from fleetgate.domain.capacity.model import (
    ClusterState,
    NodeMetrics,
    NodeState,
    Placement,
    check_namespace,
    check_node_name,
)
from fleetgate.domain.ports import CapacityLedger

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_FIELDS = (("cpus", "cpus"), ("memoryMb", "memory_mb"), ("diskGb", "disk_gb"))


class SnapshotError(ValueError):
    """The snapshot file is invalid; the message names the field and the reason."""


def _resources(item: Mapping[str, Any], where: str) -> Resources:
    values = {}
    for key, name in _FIELDS:
        value = item.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise SnapshotError(f"{where}.{key}: must be a whole number >= 0, got {value!r}")
        values[name] = value
    return Resources(**values)


def _items(doc: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    items = doc.get(key) or []
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise SnapshotError(f"{key}: must be a list of mappings")
    return items


def snapshot_of(doc: object) -> tuple[list[NodeState], dict[str, list[Placement]], ClusterState]:
    """The nodes, the placements by node and the cluster row a snapshot document describes."""
    if not isinstance(doc, dict):
        raise SnapshotError("the snapshot must be a mapping with nodes, placements and claims")
    unknown = set(doc) - {"nodes", "placements", "claims"}
    if unknown:
        raise SnapshotError(f"{sorted(unknown)[0]}: unknown key (nodes, placements, claims)")
    held: dict[str, list[Placement]] = {}
    used_by_ns: dict[str, Resources] = {}
    limits: dict[str, tuple[str, Resources, bool]] = {}
    for i, item in enumerate(_items(doc, "nodes")):
        where = f"nodes[{i}]"
        try:
            name = check_node_name(item.get("name"), f"{where}.name")
        except ValueError as exc:
            raise SnapshotError(str(exc)) from exc
        if name in limits:
            raise SnapshotError(f"{where}.name: {name!r} appears twice")
        pool = item.get("pool", "")
        schedulable = item.get("schedulable", True)
        if not isinstance(pool, str) or not isinstance(schedulable, bool):
            raise SnapshotError(f"{where}: pool must be a string and schedulable a boolean")
        limits[name] = (pool, _resources(item, where), schedulable)
    for i, item in enumerate(_items(doc, "placements")):
        where = f"placements[{i}]"
        node = item.get("node")
        if node not in limits:
            raise SnapshotError(f"{where}.node: {node!r} is not one of the nodes")
        try:
            namespace = check_namespace(item.get("namespace", "default"), f"{where}.namespace")
        except ValueError as exc:
            raise SnapshotError(str(exc)) from exc
        count = item.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise SnapshotError(f"{where}.count: must be a whole number >= 1, got {count!r}")
        size = _resources(item, where)
        on = held.setdefault(node, [])
        for _ in range(count):
            on.append(Placement(f"p{i}-{len(on)}", namespace, node, size, 0.0, EPOCH))
        drawn = used_by_ns.get(namespace, Resources())
        for _ in range(count):
            drawn = drawn.plus(size)
        used_by_ns[namespace] = drawn
    claimed, claimants = Resources(), set[str]()
    for i, item in enumerate(_items(doc, "claims")):
        where = f"claims[{i}]"
        try:
            claimants.add(check_namespace(item.get("namespace"), f"{where}.namespace"))
        except ValueError as exc:
            raise SnapshotError(str(exc)) from exc
        claimed = claimed.plus(_resources(item, where))
    nodes: list[NodeState] = []
    total, unclaimed = Resources(), Resources()
    for name, (pool, limit, schedulable) in limits.items():
        used = Resources()
        for p in held.get(name, []):
            used = used.plus(p.resources)
        capacity = Capacity(limit.cpus, limit.memory_mb, limit.disk_gb)
        nodes.append(
            NodeState(name, pool, {}, capacity, limit, used, 0.0, NodeMetrics(), schedulable, EPOCH)
        )
        total = total.plus(limit)
    for namespace, drawn in used_by_ns.items():
        if namespace not in claimants:
            unclaimed = unclaimed.plus(drawn)
    return nodes, held, ClusterState(total, claimed, unclaimed, EPOCH)


def read_snapshot(path: Path, policy: DemandPolicy) -> list[PoolHeadroom]:
    """Each pool's headroom, from a snapshot file (YAML or JSON)."""
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise SnapshotError(str(exc)) from exc
    nodes, held, cluster = snapshot_of(doc)
    return headroom(nodes, held, cluster, policy)


async def read_ledger(ledger: CapacityLedger, policy: DemandPolicy) -> list[PoolHeadroom]:
    """Each pool's headroom, from a started ledger (reads only)."""
    nodes = await ledger.nodes()
    held: dict[str, list[Placement]] = {}
    by_pool: dict[str, list[NodeState]] = {}
    for node in nodes:
        by_pool.setdefault(node.pool, []).append(node)
    for members in by_pool.values():
        # Only each pool's heaviest node is judged: read no other node's placements.
        loaded = [n for n in members if not n.used.is_zero()]
        if loaded:
            largest = max(loaded, key=lambda n: (tuple(n.used.as_dict().values()), n.name))
            held[largest.name] = await ledger.placements(node=largest.name)
    return headroom(nodes, held, await ledger.cluster(), policy)


def from_ledger_url(url: str) -> list[PoolHeadroom]:
    """Each pool's headroom from the ledger at ``url`` (the configured capacity and demand
    settings, validated: a bad one is a ConfigError naming it; the schema is not migrated).
    Errors name the database without its password."""
    from fleetgate.adapters import plugins
    from fleetgate.adapters.plugins import redact_urls
    from fleetgate.apps.container import build_container
    from fleetgate.apps.settings import load_settings

    container = build_container(load_settings(database_url=url))
    settings, policy = container.settings(), container.demand_policy()
    options = {**settings.ledger_options(), "migrate": False}
    ledger = plugins.make_ledger(
        container.plugin_manager(), settings.database_url, options, container.clock(), policy
    )

    async def read() -> list[PoolHeadroom]:
        try:
            await ledger.start()
            return await read_ledger(ledger, policy)
        finally:
            await ledger.close()

    try:
        return asyncio.run(read())
    except Exception as exc:
        raise LedgerError(f"--ledger {redact_urls(url)}: {redact_urls(str(exc))}") from exc


def source(url: str | None, snapshot: Path | None) -> Callable[[], list[PoolHeadroom]] | None:
    """What ``check`` reads the forecast from: a ledger URL, a snapshot file, or nothing."""
    if url is not None and snapshot is not None:
        return _both
    if url is not None:
        return lambda: from_ledger_url(url)
    if snapshot is not None:
        return lambda: _from_file(snapshot)
    return None


def _both() -> list[PoolHeadroom]:
    raise SnapshotError("--ledger and --ledger-snapshot: give one of them, not both")


def _from_file(path: Path) -> list[PoolHeadroom]:
    # The configured demand policy, as the ledger itself would judge (the settings validated
    # where they are read: a bad FLEETGATE_CAPACITY__* is a ConfigError naming it, exit 2).
    from fleetgate.apps.settings import load_settings

    policy = load_settings().capacity.demand_policy()
    try:
        return read_snapshot(path, policy)
    except SnapshotError as exc:
        raise SnapshotError(f"--ledger-snapshot {path}: {exc}") from exc


def findings(pools: Sequence[PoolHeadroom]) -> list[dict[str, str]]:
    """The ``LedgerHeadroom`` findings (a warning per pool whose largest node would not fit)."""
    return [
        {"code": LEDGER_HEADROOM, "severity": "warn", "message": p.message()}
        for p in pools
        if not p.fits
    ]


def report(pools: Sequence[PoolHeadroom]) -> dict[str, Any]:
    """The JSON form: every pool, and the findings."""
    return {"pools": [p.as_dict() for p in pools], "findings": findings(pools)}


def lines(pools: Sequence[PoolHeadroom]) -> list[str]:
    """The table form, one line a pool."""
    return [("ok    " if p.fits else "HELD  ") + p.message() for p in pools]


__all__ = [
    "SnapshotError",
    "findings",
    "from_ledger_url",
    "lines",
    "read_ledger",
    "read_snapshot",
    "report",
    "snapshot_of",
    "source",
]
