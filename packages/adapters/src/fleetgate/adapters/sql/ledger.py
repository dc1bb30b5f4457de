"""The SQL ledger (shell: the capacity-admission issue fills it in)."""

from __future__ import annotations

from typing import Any


class SqlLedger:
    """A CapacityLedger over SQLAlchemy async; not implemented yet."""

    def __init__(self, url: str, options: dict[str, Any]) -> None:
        self.url = url
        self.options = options
