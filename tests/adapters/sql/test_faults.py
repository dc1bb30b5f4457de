"""A connection lost in the middle of an admission leaves no partial state.

After the admission's first UPDATE has charged the cluster row, the server side of its
connection is killed from a second connection (MariaDB ``KILL``, PostgreSQL
``pg_terminate_backend``); on SQLite the connection is closed under the transaction. The caller
gets ``LedgerUnavailable``, and every counter and row is as it was before.
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.util import await_only

from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.errors import LedgerUnavailable
from fleetgate.domain.capacity.model import AdmitRequest, NodeSpec
from tests.conftest import Backend

IDENTITY = {"mariadb": "SELECT CONNECTION_ID()", "postgres": "SELECT pg_backend_pid()"}
KILL = {"mariadb": "KILL {id}", "postgres": "SELECT pg_terminate_backend({id})"}


async def state(ledger: SqlLedger) -> tuple[Any, ...]:
    return (await ledger.nodes(), await ledger.cluster(), await ledger.placements())


def after_first(ledger: SqlLedger, prefix: str, action: Any) -> Any:
    """Run ``action(cursor)`` once, right after the first statement starting with ``prefix``."""
    armed = [True]

    def hook(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if armed[0] and statement.lstrip().upper().startswith(prefix):
            armed[0] = False
            action(conn, cursor)

    sa.event.listen(ledger.store.engine.sync_engine, "after_cursor_execute", hook)
    return hook


@pytest.mark.parametrize(
    "cut_after", ["SELECT", "UPDATE CLUSTER", "UPDATE NODES", "INSERT INTO PLACEMENTS"]
)
async def test_a_connection_killed_mid_admission_leaves_nothing(
    ledger: SqlLedger, backend: Backend, cut_after: str
) -> None:
    await ledger.add_node(NodeSpec("a", Capacity(4, 4096, 40)))
    await ledger.admit(AdmitRequest("team", "a", Resources(1, 1, 1), demand=0.6))
    before = await state(ledger)
    killer = create_async_engine(backend.url) if backend.kind != "sqlite" else None

    async def kill(victim: int) -> None:
        assert killer is not None
        async with killer.connect() as conn:
            await conn.execute(sa.text(KILL[backend.kind].format(id=int(victim))))
            await conn.commit()

    def cut(conn: Any, cursor: Any) -> None:
        if killer is None:  # SQLite: the process loses its connection under the transaction
            conn.connection.dbapi_connection.close()
            return
        cursor.execute(IDENTITY[backend.kind])
        victim = cursor.fetchone()[0]
        await_only(kill(victim))

    hook = after_first(ledger, cut_after, cut)
    try:
        with pytest.raises(LedgerUnavailable):
            await ledger.admit(AdmitRequest("team", "a", Resources(2, 2, 2), demand=1.2))
    finally:
        sa.event.remove(ledger.store.engine.sync_engine, "after_cursor_execute", hook)
        if killer is not None:
            await killer.dispose()
    assert await state(ledger) == before
    # The ledger recovers on a fresh connection.
    assert (await ledger.admit(AdmitRequest("team", "a", Resources(2, 2, 2)))).admitted


async def test_an_admission_abandoned_midway_is_rolled_back(ledger: SqlLedger) -> None:
    await ledger.add_node(NodeSpec("a", Capacity(4, 4096, 40)))
    before = await state(ledger)

    class Crash(Exception):
        pass

    def crash(conn: Any, cursor: Any) -> None:
        raise Crash

    hook = after_first(ledger, "UPDATE NODES", crash)
    try:
        with pytest.raises(Crash):
            await ledger.admit(AdmitRequest("team", "a", Resources(2, 2, 2), demand=1.2))
    finally:
        sa.event.remove(ledger.store.engine.sync_engine, "after_cursor_execute", hook)
    assert await state(ledger) == before
