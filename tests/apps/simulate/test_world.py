"""The world each simulation runs in: fresh per run, governed by its one policy, and built
without the server's composition root."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

from fleetgate.apps.simulate.capacity import LedgerController
from fleetgate.apps.simulate.world import simulation_world
from tests.apps.client.test_reads import loaded_modules, within
from tests.apps.controller.world import policy

T0 = datetime(2024, 1, 1, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[3]
#: What ``fleetgate simulate`` has no use for: the server's stack, the composition root, the
#: settings, and the backends a simulation does not run on.
NOT_SIMULATION = ("fastapi", "starlette", "uvicorn", "dependency_injector", "pydantic_settings",
                  "sqlalchemy", "alembic", "kubernetes_asyncio", "fleetgate.apps.container",
                  "fleetgate.apps.api", "fleetgate.apps.settings")  # fmt: skip


def test_each_simulation_runs_in_a_fresh_world_governed_by_its_one_policy() -> None:
    pol = policy("only")
    first, second = simulation_world(T0, pol), simulation_world(T0, pol)
    assert first.cluster is not second.cluster and first.clock is not second.clock
    assert first.clock.now() == T0
    controller = first.controller
    assert controller.cluster is first.cluster and controller.clock is first.clock
    # The recorder hears the controller's events and each pass.
    assert controller.events is first.recorder and controller.on_pass == first.recorder.on_pass
    assert asyncio.run(controller.policies()) == [pol]
    assert not isinstance(controller, LedgerController)
    assert isinstance(simulation_world(T0, pol, with_ledger=True).controller, LedgerController)


def test_fleetgate_simulate_imports_nothing_of_the_server() -> None:
    examples = ROOT / "examples"
    loaded = loaded_modules(
        "simulate",
        str(examples / "policy-simulate.yaml"),
        "--fleet",
        str(examples / "fleet-generated.yaml"),
        "--from",
        "2024-01-01T00:00:00Z",
        "--to",
        "2024-01-02T00:00:00Z",
        "-o",
        "json",
    )
    assert "fleetgate.apps.simulate.world" in loaded  # it ran
    assert within(loaded, NOT_SIMULATION) == []
