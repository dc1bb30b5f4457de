"""The PostgreSQL ledger plugin: serves ``postgresql+asyncpg://`` database URLs."""

from __future__ import annotations

from typing import Any

from fleetgate.adapters.plugins import hookimpl

SCHEMES = ["postgresql+asyncpg"]


@hookimpl
def fleetgate_ledger_schemes() -> list[str]:
    """This plugin serves postgresql+asyncpg URLs."""
    return SCHEMES


@hookimpl
def fleetgate_make_ledger(url: str, options: dict[str, Any]) -> Any | None:
    """Build the SQL ledger for a postgresql+asyncpg URL."""
    if not url.startswith(SCHEMES[0] + "://"):
        return None
    from fleetgate.adapters.sql.ledger import SqlLedger

    return SqlLedger(url, options)
