"""Every database connection of the ledger killed from the server side, three times, while
writers place and release (issue 21).

A killed pooled connection fails its next statement at once; the transaction had not reached
its COMMIT, so the ledger runs it again on a fresh connection within the bounded retry: no
request may stall for seconds, and none may answer 503 unless its connection died during
the COMMIT itself (whose outcome the client cannot know). Afterwards the counters are exact.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from benchmarks.kills import kill_sessions

from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.errors import LedgerUnavailable
from fleetgate.domain.capacity.model import AdmitRequest, NodeSpec
from tests.conftest import Backend

WRITERS = 6
SECONDS = 6.0
KILLS = 3
#: A stall is an operation slower than this plus STALL_FACTOR times the slowest one before the
#: first kill: the machine's own speed is the yardstick, so a loaded machine (where a plain
#: admission can take seconds) fails no correct run, while an idle one still catches the ~9 s
#: stall MariaDB had before the fix.
STALL_FLOOR = 2.0
STALL_FACTOR = 4.0


async def test_killed_connections_under_load_stall_nothing(
    ledger: SqlLedger, backend: Backend
) -> None:
    if backend.kind == "sqlite":
        pytest.skip("SQLite has no server to kill connections on")
    await ledger.add_node(NodeSpec("k", Capacity(512, 1 << 20, 1 << 14)))
    began = time.monotonic()
    until, first_kill = began + SECONDS, began + SECONDS / (KILLS + 1)
    slowest = yardstick = 0.0
    lost: list[str] = []
    done = 0

    async def timed(operation: object) -> object:
        nonlocal slowest, yardstick, done
        started = time.monotonic()
        try:
            return await operation  # type: ignore[misc]
        except LedgerUnavailable as exc:
            lost.append(str(exc))
            return None
        finally:
            ended = time.monotonic()
            slowest = max(slowest, ended - started)
            if ended < first_kill:
                yardstick = max(yardstick, ended - started)
            done += 1

    async def writer() -> None:
        while time.monotonic() < until:
            admitted = await timed(ledger.admit(AdmitRequest("kills", "k", Resources(1, 1, 1))))
            placement = getattr(admitted, "placement", None)
            if placement is not None:
                await timed(ledger.release(placement.id))

    async def killer() -> int:
        killed = 0
        for _ in range(KILLS):
            await asyncio.sleep(SECONDS / (KILLS + 1))
            killed += await kill_sessions(backend.url, backend.kind)
        return killed

    results = await asyncio.gather(killer(), *(writer() for _ in range(WRITERS)))
    killed = results[0]
    assert killed >= KILLS, "the kills found no connection of the ledger to kill"
    summary = (
        f"{done} operations, {killed} connections killed, slowest {slowest:.1f}s "
        f"(before the first kill {yardstick:.1f}s), {lost}"
    )
    assert slowest < STALL_FLOOR + STALL_FACTOR * yardstick, summary
    # Only a connection killed during its COMMIT may answer 503: at most one per writer per kill.
    assert all("during commit" in message for message in lost), summary
    assert len(lost) <= WRITERS * KILLS, summary
    assert (await ledger.reconcile()).summary.clean
