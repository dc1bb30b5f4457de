"""Opening a real SQL ledger on the database under test, emptied for each test.

The per-session database (``backend`` fixture) is shared by every test in a run, so each ledger
handed to a test starts from empty tables and a zeroed cluster row.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from fleetgate.adapters import plugins
from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.adapters.sql.schema import CLUSTER_ID, cluster, metadata
from tests.conftest import Backend

#: The instant every test's virtual clock starts at.
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
#: Child tables first, so foreign keys never object.
_EMPTY_ORDER = ("placements", "claims", "events", "api_tokens", "nodes")
_MIGRATED: set[str] = set()


async def empty(ledger: SqlLedger) -> None:
    """Delete every row and zero the cluster singleton."""
    async with ledger.store.engine.begin() as conn:
        for name in _EMPTY_ORDER:
            await conn.execute(sa.delete(metadata.tables[name]))
        zeros = {c.name: 0 for c in cluster.columns if c.name not in ("id", "updated_at")}
        await conn.execute(
            sa.update(cluster).where(cluster.c.id == CLUSTER_ID).values(updated_at=0.0, **zeros)
        )


@asynccontextmanager
async def open_ledger(
    backend: Backend,
    clock: VirtualClock | None = None,
    enforcement: str = "advisory",
    **capacity: Any,
) -> AsyncIterator[SqlLedger]:
    """A started, emptied ledger on the backend, built through the plugin manager."""
    options = backend.ledger_options(**capacity)
    options["claims"] = {"enforcement": enforcement}
    # Migrating is idempotent but not free: do it once per database per test session.
    options["migrate"] = backend.url not in _MIGRATED
    _MIGRATED.add(backend.url)
    ledger = plugins.make_ledger(
        plugins.plugin_manager(), backend.url, options, clock or VirtualClock(START)
    )
    assert isinstance(ledger, SqlLedger)
    await ledger.start()
    try:
        await empty(ledger)
        yield ledger
    finally:
        await ledger.close()
