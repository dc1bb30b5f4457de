"""The MariaDB plugin: matched-row counts, session variables on every connection, retry codes."""

from __future__ import annotations

import pytest
from pymysql.constants import CLIENT
from sqlalchemy.exc import OperationalError

from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.adapters.sql.mariadb.plugin import MariaDbSupport, session_statements
from tests.conftest import Backend


class Orig(Exception):
    """A driver error with a MySQL errno."""


@pytest.mark.parametrize(("errno", "retry"), [(1213, True), (1205, True), (1020, True),
                                               (1062, False), (2013, False)])  # fmt: skip
def test_deadlock_lock_wait_and_snapshot_conflict_are_retryable(errno: int, retry: bool) -> None:
    error = OperationalError("UPDATE", {}, Orig(errno, "message"))
    assert MariaDbSupport().retryable(error) is retry


def test_connections_count_matched_rows() -> None:
    args = MariaDbSupport().engine_kwargs({})["connect_args"]
    assert args["client_flag"] & CLIENT.FOUND_ROWS


def test_session_variables_are_checked_and_rendered() -> None:
    assert session_statements(
        {"innodb_snapshot_isolation": "ON", "innodb_lock_wait_timeout": 5, "sql_safe": True}
    ) == [
        "SET SESSION innodb_lock_wait_timeout = 5",
        "SET SESSION innodb_snapshot_isolation = 'ON'",
        "SET SESSION sql_safe = 'ON'",
    ]
    with pytest.raises(ValueError, match="session_variables"):
        session_statements({"x; DROP TABLE nodes": "1"})
    with pytest.raises(ValueError, match=r"session_variables\.tx_isolation"):
        session_statements({"tx_isolation": "'; DROP"})


async def test_the_configured_session_variables_are_in_force(
    ledger: SqlLedger, backend: Backend
) -> None:
    if backend.kind != "mariadb":
        pytest.skip("MariaDB session variables apply only to a MariaDB backend")
    async with ledger.store.engine.connect() as conn:
        value = (await conn.exec_driver_sql("SELECT @@SESSION.innodb_snapshot_isolation")).scalar()
        matched = await conn.exec_driver_sql("UPDATE cluster SET id = id WHERE id = 1")
        await conn.rollback()
    expected = 1 if backend.session_variables.get("innodb_snapshot_isolation") == "ON" else 0
    assert value == expected
    assert matched.rowcount == 1  # a no-op UPDATE still counts its matched row
