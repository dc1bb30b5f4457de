"""The SQLite (the embedded default) ledger plugin: serves ``sqlite+aiosqlite://`` database URLs."""

from __future__ import annotations

from typing import Any

from fleetgate.adapters.plugins import hookimpl

SCHEMES = ["sqlite+aiosqlite"]


@hookimpl
def fleetgate_ledger_schemes() -> list[str]:
    """This plugin serves sqlite+aiosqlite URLs."""
    return SCHEMES


@hookimpl
def fleetgate_make_ledger(url: str, options: dict[str, Any]) -> Any | None:
    """Build the SQL ledger for a sqlite+aiosqlite URL."""
    if not url.startswith(SCHEMES[0] + "://"):
        return None
    from fleetgate.adapters.sql.ledger import SqlLedger

    return SqlLedger(url, options)
