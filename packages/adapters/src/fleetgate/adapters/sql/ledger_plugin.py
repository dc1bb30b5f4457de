"""The two ledger hooks, written once for every dialect: where a dialect and the ledger meet.

``dialect.py`` is the interface a dialect implements and the generic store uses; it does not
build the ledger that uses it (that would tie the interface to the implementation in one import
cycle). This module imports both: each dialect room's plugin (``sqlite``, ``mariadb``,
``postgres``) is a :class:`LedgerPlugin`, so one instance is both its dialect and its pluggy
plugin, registered through its entry point.
"""

from __future__ import annotations

from typing import Any

from fleetgate.adapters.plugins import hookimpl
from fleetgate.adapters.sql.dialect import DialectSupport
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.ports import CapacityLedger, Clock


class LedgerPlugin(DialectSupport):
    """A dialect that is also the plugin serving the SQL ledger on it."""

    @hookimpl
    def fleetgate_ledger_schemes(self) -> list[str]:
        """The URL schemes this dialect serves."""
        return list(self.schemes)

    @hookimpl
    def fleetgate_make_ledger(
        self, url: str, options: dict[str, Any], clock: Clock | None, demand: DemandPolicy
    ) -> CapacityLedger | None:
        """The SQL ledger on this dialect, for a URL of one of its schemes."""
        scheme, sep, _ = url.partition("://")
        if not sep or scheme not in self.schemes:
            return None
        return SqlLedger(url, options, dialect=self, clock=clock, demand=demand)
