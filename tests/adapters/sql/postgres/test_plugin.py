"""The PostgreSQL plugin: serialization failures and deadlocks are retried."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import DBAPIError

from fleetgate.adapters.sql.postgres.plugin import PostgresSupport


class Orig(Exception):
    """A driver error carrying a SQLSTATE."""

    def __init__(self, sqlstate: str) -> None:
        super().__init__(sqlstate)
        self.sqlstate = sqlstate


@pytest.mark.parametrize(("state", "retry"), [("40001", True), ("40P01", True),
                                               ("23505", False), ("57P01", False)])  # fmt: skip
def test_serialization_failure_and_deadlock_are_retryable(state: str, retry: bool) -> None:
    assert PostgresSupport().retryable(DBAPIError("UPDATE", {}, Orig(state))) is retry
