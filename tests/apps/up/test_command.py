"""``fleetgate up``'s own choices: configuration, a fresh database, exit codes for bad input."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import structlog

from fleetgate.apps.settings import Settings
from fleetgate.apps.up import command, runtime


def test_up_runs_on_its_own_sqlite_file_and_the_fake_cluster_with_an_admin_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    configured = Settings(database_url="postgresql+asyncpg://db/prod", cluster="karpenter")
    settings = command.up_settings(configured, Path("p.yaml"), 0)
    assert settings.database_url == f"sqlite+aiosqlite:///{tmp_path / '.fleetgate' / 'up.db'}"
    assert settings.cluster == "fake" and settings.cluster_options == {}
    assert settings.api.port == 0 and settings.api.admin_token
    assert settings.controller.policies == [Path("p.yaml")]
    assert not settings.controller.leader_election
    keep = Settings(api={"admin_token": "mine"})  # type: ignore[arg-type]
    assert command.up_settings(keep, Path("p.yaml"), 1).api.admin_token == "mine"


def test_every_start_is_fresh_and_never_touches_the_api_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    data = tmp_path / ".fleetgate"
    data.mkdir()
    for name in ("up.db", "up.db-wal", "up.db-shm", "fleetgate.db"):
        (data / name).write_text("x")
    command.fresh_database()
    assert sorted(p.name for p in data.iterdir()) == ["fleetgate.db"]


def test_a_bad_policy_file_is_invalid_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: RotationPolicy\napiVersion: fleetgate.io/v1alpha1\nspec: {}\n")
    assert command.run_up(bad, 2, 600.0, 0) == command.EXIT_INVALID
    assert "bad.yaml" in capsys.readouterr().err
    assert not (tmp_path / ".fleetgate").exists()  # nothing started, nothing written
    assert command.run_up(tmp_path / "missing.yaml", 2, 600.0, 0) == command.EXIT_INVALID


def test_the_reconcile_pass_follows_virtual_time_but_runs_at_most_once_a_real_second() -> None:
    settings = Settings()  # reconciler.interval_seconds = 300
    assert runtime.cadence_for(settings, 600.0).reconcile == 1.0
    assert runtime.cadence_for(settings, 30.0).reconcile == 10.0


def test_a_start_up_failure_is_reported_with_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)

    async def broken(*_: object) -> int:
        raise OSError("disk full")

    monkeypatch.setattr(command, "_main", broken)
    monkeypatch.setattr(command, "quiet_logging", lambda *_: None)
    assert command.run_up(None, 2, 600.0, 0) == command.EXIT_FAILED
    assert "could not start: OSError: disk full" in capsys.readouterr().err


def test_a_taken_port_fails_fast_with_exit_1_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(command, "quiet_logging", lambda *_: None)
    with command.listen("127.0.0.1", 0) as taken:
        port = taken.getsockname()[1]
        assert command.run_up(None, 2, 600.0, port) == command.EXIT_FAILED
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err
    assert not list((tmp_path / ".fleetgate").iterdir())  # no database was created


def test_verbose_streams_the_controller_and_the_reconciler_quiet_does_not(
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = Settings()
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, structlog.get_config())
    try:
        for verbose in (False, True):
            command.quiet_logging(settings, verbose)
            logging.getLogger("fleetgate.controller").info("controller pass %s", verbose)
            logging.getLogger("fleetgate.reconciler").info("reconcile pass %s", verbose)
            logging.getLogger("fleetgate.events").info("instance placed %s", verbose)
        err = capsys.readouterr().err
        assert "controller pass True" in err and "reconcile pass True" in err
        assert "controller pass False" not in err and "reconcile pass False" not in err
        assert "instance placed" not in err  # the audit events stay in the ledger either way
    finally:
        for name in (*command.VERBOSE_LOGGERS, "fleetgate.events"):
            logging.getLogger(name).setLevel(logging.NOTSET)
        root.handlers[:], root.level = saved[0], saved[1]
        structlog.configure(**saved[2])


def test_the_banner_links_the_dashboard_and_the_what_if_page_with_the_token(
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = Settings(api={"admin_token": "banner-token-1", "host": "0.0.0.0"})  # type: ignore[arg-type]
    command._banner(settings, 8123, [], 600.0)
    out = capsys.readouterr().out
    assert "http://127.0.0.1:8123/?token=banner-token-1" in out
    assert "http://127.0.0.1:8123/whatif?token=banner-token-1" in out
