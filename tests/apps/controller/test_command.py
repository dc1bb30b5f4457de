"""``fleetgate controller``: the round loop, and the ledger following the cluster when asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetgate.apps.container import build_container
from fleetgate.apps.controller.command import once_summary, run_controller, run_loop
from fleetgate.apps.settings import ControllerSettings, Settings

EXAMPLE = Path(__file__).parents[3] / "examples" / "weekend-policy.yaml"


def settings(url: str, *, sync: bool) -> Settings:
    return Settings(
        database_url=url,
        cluster="fake",
        controller=ControllerSettings(policies=[EXAMPLE], sync_ledger=sync, leader_election=False),
    )


async def test_after_each_round_the_ledger_follows_the_cluster(tmp_sqlite_url: str) -> None:
    container = build_container(settings(tmp_sqlite_url, sync=True))
    cluster, ledger = container.cluster(), container.ledger()
    cluster.add_pool("general", expire_after="14d", termination_grace_period="1h")
    cluster.add_node("general", "n1")
    cluster.add_node("general", "n2", ready=False)
    await ledger.start()
    try:
        assert await ledger.nodes() == []
        await run_loop(
            container.rotation_controller(), once=True, after_round=container.node_sync().sync
        )
        assert [n.name for n in await ledger.nodes()] == ["n1"]  # only the Ready node joined
        cluster.set_ready("n2", True)
        await run_loop(
            container.rotation_controller(), once=True, after_round=container.node_sync().sync
        )
        assert sorted(n.name for n in await ledger.nodes()) == ["n1", "n2"]
    finally:
        await ledger.close()


def test_the_command_runs_a_round_with_the_ledger_in_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "ledger.db"
    monkeypatch.setenv("FLEETGATE_DATABASE_URL", f"sqlite+aiosqlite:///{db}")
    monkeypatch.setenv("FLEETGATE_CLUSTER", "fake")
    monkeypatch.setenv("FLEETGATE_CONTROLLER__POLICIES", f'["{EXAMPLE}"]')
    monkeypatch.setenv("FLEETGATE_CONTROLLER__SYNC_LEDGER", "true")
    monkeypatch.setenv("FLEETGATE_CONTROLLER__LEADER_ELECTION", "false")
    assert run_controller(once=True) == 0
    assert db.exists()  # the ledger was started (migrated) for the sync


def test_declaring_the_reference_controller_gone_reaches_the_machine() -> None:
    assert build_container(Settings()).rotation_controller().config.reference_gone is False
    settings = Settings(controller=ControllerSettings(reference_controller_gone=True))
    assert build_container(settings).rotation_controller().config.reference_gone is True


async def test_once_says_which_pools_it_saw_and_what_it_did(tmp_sqlite_url: str) -> None:
    container = build_container(settings(tmp_sqlite_url, sync=False))
    cluster = container.cluster()
    cluster.add_pool("general", expire_after="14d", termination_grace_period="1h")
    cluster.add_node("general", "n1")
    results = await run_loop(container.rotation_controller(), once=True)
    actions = sum(len(r.applied) for r in results)
    lines = once_summary(results).splitlines()
    assert lines[0] == f"controller --once: 1 pool(s) seen, {actions} action(s) taken"
    assert lines[1].startswith("  general: ") and lines[1].endswith(")")


def test_the_once_command_prints_its_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FLEETGATE_DATABASE_URL", f"sqlite+aiosqlite:///{tmp_path / 'l.db'}")
    monkeypatch.setenv("FLEETGATE_CLUSTER", "fake")
    monkeypatch.setenv("FLEETGATE_CONTROLLER__LEADER_ELECTION", "false")
    assert run_controller(once=True) == 0
    assert "controller --once: 0 pool(s) seen, 0 action(s) taken" in capsys.readouterr().out
