"""``fleetgate up``'s own choices: configuration, a fresh database, exit codes for bad input."""

from __future__ import annotations

import json
import logging
import urllib.request
from pathlib import Path

import pytest
import structlog

from fleetgate.apps.settings import Settings
from fleetgate.apps.up import command, runtime
from fleetgate.apps.up.datadir import AlreadyRunning, DataDirLock
from tests.servers import UpProcess


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
    assert not (tmp_path / ".fleetgate").exists()  # nothing was created, nothing deleted


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


def test_the_data_directory_lock_is_exclusive_and_names_its_holder(tmp_path: Path) -> None:
    first, second = DataDirLock(tmp_path / "d"), DataDirLock(tmp_path / "d")
    with first:
        first.record(8123)
        with pytest.raises(AlreadyRunning) as refused:
            second.acquire()
        assert "another fleetgate up is running from" in str(refused.value)
        assert "port 8123" in str(refused.value) and str(tmp_path / "d") in str(refused.value)
        assert second.holder() is not None and second.holder().port == 8123  # type: ignore[union-attr]
    with second:  # released with the first: the next instance may start
        assert second.holder() is None  # nothing recorded yet
    (tmp_path / "d" / "up.lock").write_text("999999999 8123\n")  # a holder long gone
    assert DataDirLock(tmp_path / "d").holder() is None


def _node_names(link: str) -> list[str]:
    """The nodes served by the instance behind the dashboard ``link``."""
    base, token = link.split("/?token=")
    request = urllib.request.Request(
        f"{base}/v1/nodes", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200
        return [node["name"] for node in json.load(response)]


def _mark(link: str, name: str) -> None:
    """Add a node only this instance's database will hold: a file's inode is no mark (a new
    file may take the number a deleted one freed), its content is."""
    base, token = link.split("/?token=")
    request = urllib.request.Request(
        f"{base}/v1/nodes/{name}",
        data=json.dumps({"threads": 2, "memory_mb": 1024, "disk_gb": 10}).encode(),
        method="PUT",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status in (200, 201)


@pytest.mark.slow
def test_a_second_up_never_touches_the_running_ones_database(tmp_path: Path) -> None:
    first = UpProcess(tmp_path)
    try:
        link = first.link()
        port = int(link.split(":")[2].split("/")[0])
        _mark(link, "first-up-marker")
        # The same directory on another port: refused by the directory's lock.
        # The same directory and the same port: refused by the port, naming the instance.
        for args, says in (
            ((0,), "another fleetgate up is running from"),
            ((port,), f"cannot listen on 127.0.0.1:{port}: another fleetgate up is running"),
        ):
            second = UpProcess(tmp_path, *args)
            try:
                assert second.process.wait(timeout=120) == command.EXIT_FAILED
            finally:
                second.close()
            err = "".join(second.stderr)
            assert len(err.strip().splitlines()) == 1, err
            assert says in err and f"pid {first.process.pid}" in err, err
            # The first one still serves from its own database, untouched.
            assert "first-up-marker" in _node_names(link)
        assert first.interrupt() == 0
    finally:
        first.close()
    # Stopped, the directory is free again: a new `up` starts there on a fresh database.
    third = UpProcess(tmp_path)
    try:
        assert "first-up-marker" not in _node_names(third.link())
        assert third.interrupt() == 0
    finally:
        third.close()
