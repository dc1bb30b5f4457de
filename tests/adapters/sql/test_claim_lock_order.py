"""The create-versus-release race behind issue 21's deadlocks, staged step by step.

A claim create has locked its namespace's placements; a placement is then admitted in that
namespace; the create takes the cluster row; a release of the new placement locks it and waits
for the cluster row. The create must not now wait for that placement (the old order did: a
deadlock on PostgreSQL, an admission stuck behind the create's gap locks on MariaDB). It skips
it, commits, and the release then credits the unclaimed side, where that placement still is.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.util import await_only

from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.domain.capacity.claims import ClaimRequest
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.model import AdmitRequest, NodeSpec, Release
from tests.adapters.sql.churn import Tally, counting_retries
from tests.conftest import Backend
from tests.waiting import HANG_SECONDS

NS = "race"
#: The create's first statement, spaces removed: the UPDATE locking its placements (pointing
#: them at the new claim).
CREATE_STEP_ONE = "UPDATEPLACEMENTSSETCLAIM_ID="
#: Bounded waits inside the staged steps: hang guards, past anything a loaded machine needs.
STEP_TIMEOUT = HANG_SECONDS


async def test_a_create_never_waits_for_a_placement_a_release_holds(
    ledger: SqlLedger, backend: Backend
) -> None:
    if backend.kind == "sqlite":
        pytest.skip("SQLite runs one writer at a time: there is no lock to wait for")
    await ledger.add_node(NodeSpec("r", Capacity(64, 65536, 1000)))
    first = await ledger.admit(AdmitRequest(NS, "r", Resources(1, 100, 1)))
    assert first.placement is not None
    staged: dict[str, Any] = {}
    release: list[asyncio.Task[Release]] = []

    def hook(conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        text = " ".join(statement.upper().split())
        creating = staged.get("create") is conn.connection.dbapi_connection
        if "create" not in staged and CREATE_STEP_ONE in text.replace(" ", ""):
            staged["create"] = conn.connection.dbapi_connection
            # A placement admitted after the create locked the namespace's placements.
            admitted = await_only(
                asyncio.wait_for(
                    ledger.admit(AdmitRequest(NS, "r", Resources(2, 200, 2))), STEP_TIMEOUT
                )
            )
            staged["new"] = admitted.placement
        elif creating and "new" in staged and not release and text.startswith("UPDATE CLUSTER"):
            # The create holds the cluster row: release the new placement, which locks it and
            # then waits for the cluster row, and give it time to get there.
            release.append(asyncio.get_running_loop().create_task(
                ledger.release(staged["new"].id)))  # fmt: skip
            await_only(asyncio.sleep(1.0))

    engine = ledger.store.engine.sync_engine
    sa.event.listen(engine, "after_cursor_execute", hook)
    tally = Tally()
    try:
        with counting_retries(tally):
            outcome = await asyncio.wait_for(
                ledger.create_claim(ClaimRequest(NS, Resources(10, 10000, 100), 3600)),
                STEP_TIMEOUT * 3,
            )
            assert release, "the staged release never started"
            released = await asyncio.wait_for(release[0], STEP_TIMEOUT)
    finally:
        sa.event.remove(engine, "after_cursor_execute", hook)
    assert tally.retries == 0, tally.describe()
    assert outcome.claim is not None, outcome.refusal
    assert released.released
    # The claim took over the placement it could lock; the released one was credited unclaimed.
    claim = await ledger.claim(outcome.claim.id)
    assert claim is not None and claim.used == Resources(1, 100, 1)
    assert (await ledger.cluster()).unclaimed_used == Resources()
    assert (await ledger.reconcile()).summary.clean
