"""``fleetgate check --ledger URL | --ledger-snapshot FILE``: could each node of each pool be
drained now (finding ``LedgerHeadroom`` per node that could not; the judgement is the domain's,
``capacity.headroom``)?

The ledger is read, never written, and never migrated (``migrate: false``). A snapshot file
describes the same thing by hand; its format and every rule it is held to are
:mod:`fleetgate.apps.ledgerfile`'s (the one reader ``simulate`` uses for ``fleet.ledger`` too).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fleetgate.apps.ledgerfile import LedgerFileError, snapshot_of
from fleetgate.apps.yamlfile import YamlFileError, read_yaml
from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.capacity.errors import LedgerError
from fleetgate.domain.capacity.headroom import (
    CAPACITY_HOLD_MEETS_EXPIRY,
    LEDGER_HEADROOM,
    PoolHeadroom,
    expiry_message,
    headroom,
)
from fleetgate.domain.capacity.model import Placement
from fleetgate.domain.ports import CapacityLedger


def read_snapshot(path: Path, policy: DemandPolicy) -> list[PoolHeadroom]:
    """Each pool's headroom, from a snapshot file (YAML or JSON)."""
    nodes, held, cluster = snapshot_of(read_yaml(path))
    return headroom(nodes, held, cluster, policy)


async def read_ledger(ledger: CapacityLedger, policy: DemandPolicy) -> list[PoolHeadroom]:
    """Each pool's headroom, from a started ledger (reads only)."""
    nodes = await ledger.nodes()
    held: dict[str, list[Placement]] = {}
    for node in nodes:
        if not node.used.is_zero():  # a node whose counters show nothing holds nothing
            held[node.name] = await ledger.placements(node=node.name)
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
    raise LedgerFileError("--ledger and --ledger-snapshot: give one of them, not both")


def _from_file(path: Path) -> list[PoolHeadroom]:
    # The configured demand policy, as the ledger itself would judge (the settings validated
    # where they are read: a bad FLEETGATE_CAPACITY__* is a ConfigError naming it, exit 2).
    from fleetgate.apps.settings import load_settings

    policy = load_settings().capacity.demand_policy()
    try:
        return read_snapshot(path, policy)
    except (LedgerFileError, YamlFileError) as exc:
        raise LedgerFileError(f"--ledger-snapshot {path}: {exc}") from None


def findings(pools: Sequence[PoolHeadroom], expire_after: str | None) -> list[dict[str, str]]:
    """A ``LedgerHeadroom`` warning per node that could not be drained now and, when the pool's
    nodes expire (``expire_after``, None: Never), a ``CapacityHoldMeetsExpiry`` warning: held
    with nothing changed, the node meets Karpenter's forced expiry."""
    out = []
    for p in pools:
        for verdict, message in zip(p.held, p.messages(), strict=True):
            out.append({"code": LEDGER_HEADROOM, "severity": "warn", "message": message})
            if expire_after is not None:
                text = expiry_message(p.pool, verdict, expire_after)
                out.append(
                    {"code": CAPACITY_HOLD_MEETS_EXPIRY, "severity": "warn", "message": text}
                )
    return out


def report(pools: Sequence[PoolHeadroom], expire_after: str | None) -> dict[str, Any]:
    """The JSON form: every pool, and the findings."""
    return {"pools": [p.as_dict() for p in pools], "findings": findings(pools, expire_after)}


def lines(pools: Sequence[PoolHeadroom]) -> list[str]:
    """The table form, one line a pool."""
    return [("ok    " if p.fits else "HELD  ") + p.summary() for p in pools]


__all__ = [
    "findings",
    "from_ledger_url",
    "lines",
    "read_ledger",
    "read_snapshot",
    "report",
    "source",
]
