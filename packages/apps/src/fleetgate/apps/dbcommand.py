"""``fleetgate db upgrade``: migrate the configured database with the ledger's own migrations."""

from __future__ import annotations

import asyncio

from rich.console import Console

from fleetgate.adapters.plugins import PluginNotFound
from fleetgate.apps.container import build_container
from fleetgate.apps.settings import ConfigError
from fleetgate.domain.capacity.errors import LedgerError
from fleetgate.domain.ports import CapacityLedger

_out = Console()
_err = Console(stderr=True)


async def _upgrade(ledger: CapacityLedger, revision: str) -> str:
    try:
        return await ledger.migrate(revision)
    finally:
        await ledger.close()


def run_upgrade(revision: str) -> int:
    """Migrate to ``revision``; 0 on success, 1 if the database failed, 2 for bad configuration."""
    try:
        container = build_container()
        settings = container.settings()
        ledger = container.ledger()
    except (ConfigError, PluginNotFound, ValueError) as exc:
        _err.print(f"[red]error:[/red] {exc}", highlight=False)
        return 2
    try:
        current = asyncio.run(_upgrade(ledger, revision))
    except LedgerError as exc:
        _err.print(f"[red]error:[/red] {exc}", highlight=False)
        return 1
    except Exception as exc:  # Alembic and driver errors: report, do not dump a traceback
        _err.print(f"[red]error:[/red] migrating {settings.database_url}: {exc}", highlight=False)
        return 1
    _out.print(f"database at revision {current or '(empty)'}", highlight=False)
    return 0
