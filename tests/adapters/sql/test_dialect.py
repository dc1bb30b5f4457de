"""What the dialects read from a driver error: the code that decides whether to retry."""

from __future__ import annotations

import sqlite3

import pymysql.err
from sqlalchemy.exc import OperationalError

from fleetgate.adapters.sql.dialect import error_code
from fleetgate.adapters.sql.plugin_mariadb import MariaDbSupport


def wrapped(orig: BaseException) -> OperationalError:
    return OperationalError("UPDATE ...", {}, orig)


def test_a_mariadb_deadlock_is_known_by_its_errno_even_with_a_sqlstate() -> None:
    # A real server's error packet carries a SQLSTATE too ("40001" for a deadlock); the errno
    # is what the MariaDB plugin retries on.
    deadlock = wrapped(pymysql.err.OperationalError(1213, "Deadlock found", sqlstate="40001"))
    assert error_code(deadlock) == 1213
    assert MariaDbSupport().retryable(deadlock)
    syntax = wrapped(pymysql.err.ProgrammingError(1064, "syntax", sqlstate="42000"))
    assert not MariaDbSupport().retryable(syntax)


def test_a_sqlite_error_is_known_by_its_extended_code() -> None:
    busy = sqlite3.OperationalError("database is locked")
    busy.sqlite_errorcode = sqlite3.SQLITE_BUSY  # type: ignore[attr-defined]
    assert error_code(wrapped(busy)) == sqlite3.SQLITE_BUSY
