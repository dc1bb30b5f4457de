"""No command prints a database password: every command that names or uses the database URL
runs with a password in it (pasted ``postgresql://`` form, so the mapping note runs too) and
all of its output, stdout and stderr, is searched for the password.

The URL points at a fresh database on the machine's PostgreSQL server (trust authentication
there ignores the password, so the commands succeed and print their real banners), plus the
failure paths: a refused connection and a scheme nobody serves.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import make_url

from tests.backends import create_database, drop_database

FLEETGATE = Path(sys.executable).with_name("fleetgate")
PASSWORD = "S3cret-" + secrets.token_hex(4)
SERVER = os.environ.get(
    "FLEETGATE_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
)


@pytest.fixture(scope="module")
def url_with_password() -> Iterator[str]:
    """A fresh database's URL in the pasted ``postgresql://`` form, with a password in it."""
    name = f"fgt_{os.getpid()}_{secrets.token_hex(3)}"
    created = make_url(create_database(SERVER, name))
    pasted = created.set(drivername="postgresql", password=PASSWORD)
    try:
        yield pasted.render_as_string(hide_password=False)
    finally:
        drop_database(SERVER, name)


def output(tmp_path: Path, url: str, *args: str) -> tuple[int, str]:
    """Exit status and everything the real command printed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETGATE_")}
    env["FLEETGATE_DATABASE_URL"] = url
    done = subprocess.run(
        [str(FLEETGATE), *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


COMMANDS = [
    ("db", "upgrade"),
    ("db", "current"),
    ("db", "history"),
    ("reconciler", "--once"),
]


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_no_command_prints_the_database_password(
    args: tuple[str, ...], url_with_password: str, tmp_path: Path
) -> None:
    status, printed = output(tmp_path, url_with_password, *args)
    assert status == 0, printed
    assert PASSWORD not in printed
    if args[0] == "db":  # the db commands name the database they used
        assert ":***@" in printed, printed


def test_failures_do_not_print_the_password_either(tmp_path: Path) -> None:
    for url, args in [
        (f"oracle://u:{PASSWORD}@db/x", ("db", "upgrade")),
        (f"u:{PASSWORD}@db", ("db", "current")),
        (f"postgresql://u:{PASSWORD}@127.0.0.1:5432/no_such_db_{os.getpid()}", ("db", "upgrade")),
    ]:
        status, printed = output(tmp_path, url, *args)
        assert status != 0 and "error:" in printed, printed
        assert PASSWORD not in printed, printed
