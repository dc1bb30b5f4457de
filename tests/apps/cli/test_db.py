"""``fleetgate db upgrade``: migrates the configured database; bad input and failures exit 1/2."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from fleetgate.apps.cli.db import run_upgrade


def test_upgrade_creates_every_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "state" / "fleetgate.db"
    monkeypatch.setenv("FLEETGATE_DATABASE_URL", f"sqlite+aiosqlite:///{db}")
    assert run_upgrade("head") == 0
    assert run_upgrade("head") == 0  # idempotent
    with sqlite3.connect(db) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        version = conn.execute("SELECT version_num FROM alembic_version").fetchone()[0]
    assert {"nodes", "placements", "claims", "cluster", "events", "api_tokens"} <= tables
    assert version == "0006_reservations"


def test_an_unknown_revision_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEETGATE_DATABASE_URL", f"sqlite+aiosqlite:///{tmp_path / 'x.db'}")
    assert run_upgrade("no-such-revision") == 1


def test_an_unknown_scheme_is_invalid_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEETGATE_DATABASE_URL", "oracle+x://db")
    assert run_upgrade("head") == 2
