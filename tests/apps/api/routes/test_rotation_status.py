"""``GET /v1/rotation/status``: each pool's standing, derived read-only from the cluster."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from fleetgate.apps.api.schemas.status import PoolRotationBody
from fleetgate.apps.clientoutput import Output, render
from fleetgate.apps.clientviews import STATUS
from fleetgate.apps.settings import ControllerSettings
from fleetgate.domain.rotation.ledger_gate import ledger_hold
from tests.apps.api.conftest import ADMIN, Api, api_settings, running_api
from tests.conftest import Backend
from tests.e2e.test_rotate_held_for_capacity import SMALL, load_placements, rig
from tests.ledgers import START

POLICY = """\
apiVersion: fleetgate.io/v1alpha1
kind: RotationPolicy
metadata: {name: nightly}
spec:
  nodePoolSelector: {matchLabels: {fleetgate.io/rotation: nightly}}
  maintenanceWindows:
    - {timezone: UTC, days: [Mon, Tue, Wed, Thu, Fri, Sat, Sun], start: "02:00", end: "04:00"}
"""


@pytest.fixture
async def rotation_api(sqlite_backend: Backend, tmp_path: Path) -> AsyncIterator[Api]:
    """The API with one policy file and, on its fake cluster, a governed and an ungoverned pool."""
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    settings = api_settings(sqlite_backend, controller=ControllerSettings(policies=[path]))
    async for api in running_api(settings):
        cluster = api.container.cluster()
        cluster.add_pool("web", expire_after="14d", termination_grace_period="1h",
                         labels={"fleetgate.io/rotation": "nightly"})  # fmt: skip
        cluster.add_pool("batch", expire_after="14d")
        for age in (1, 2, 3):
            cluster.add_node("web", created_at=api.clock.now() - timedelta(days=age))
        yield api


async def test_every_pool_is_reported_with_its_window_a_g_and_gate(rotation_api: Api) -> None:
    api = rotation_api
    before = {name: dict(p.annotations) for name, p in api.container.cluster().pools.items()}
    r = await api.client.get("/v1/rotation/status", headers=await api.token("team-a"))
    assert r.status_code == 200, r.text
    pools = {p["pool"]: p for p in r.json()}
    assert list(pools) == ["batch", "web"]
    web = pools["web"]
    assert (web["governance"], web["policy"], web["nodes"]) == ("governed", "nightly", 3)
    # The test clock starts at 09:00 UTC: the 02:00-04:00 window is closed, next opens tomorrow.
    assert web["window_open"] is False and web["reason"] == "outOfWindow"
    assert web["next_window_start"].endswith("02:00:00Z")
    assert web["next_window_end"].endswith("04:00:00Z")
    assert web["age_threshold_seconds"] > 0 and web["age_threshold"]
    assert web["guaranteed_chances"] >= 1 and web["rotating"] is None
    batch = pools["batch"]
    assert (batch["governance"], batch["policy"], batch["next_window_start"]) == (
        "ungoverned",
        None,
        None,
    )
    # Read-only: no annotation was written on any pool.
    after = {name: dict(p.annotations) for name, p in api.container.cluster().pools.items()}
    assert after == before


async def test_the_rotation_status_needs_a_token(rotation_api: Api) -> None:
    assert (await rotation_api.client.get("/v1/rotation/status")).status_code == 401
    ok = await rotation_api.client.get("/v1/rotation/status", headers=ADMIN)
    assert ok.status_code == 200


HELD_POLICY = """\
apiVersion: fleetgate.io/v1alpha1
kind: RotationPolicy
metadata: {name: everything}
spec:
  nodePoolSelector: {}
  ageThreshold: 1h
  maintenanceWindows:
    - {timezone: UTC, days: [Mon, Tue, Wed, Thu, Fri, Sat, Sun], start: "00:00", end: "24:00"}
  surge: {cooldownAfter: 2m}
"""


async def test_during_a_ledger_hold_the_status_reports_what_the_controller_decided(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    """Issue 41 item 7: with the node sync on, the status said ``ledger_hold: null`` while the
    controller held a node (its Event and the dashboard said so). Both now come from one
    wiring: the API's status judges with the controller's own ledger gate. The hold here is a
    drain's: the pool launches small nodes, and big's surge brings too little room."""
    path = tmp_path / "policy.yaml"
    path.write_text(HELD_POLICY)
    ctl = ControllerSettings(policies=[path], sync_ledger=True, leader_election=False)
    async for api in running_api(api_settings(sqlite_backend, controller=ctl)):
        cluster, big, small = rig(
            api.clock, young=True, cluster=api.container.cluster(), launches=SMALL
        )
        sync = api.container.node_sync()
        await sync.sync()
        await load_placements(api.container.ledger(), cluster, big, small)
        controller = api.container.rotation_controller()
        assert controller.relocation is not None  # the gate is the container's wiring
        decided = None
        while decided is None:
            assert api.clock.now() < START + timedelta(minutes=10), "big's drain was not held"
            for result in await controller.run_due():
                assert result.step is not None
                decided = ledger_hold(result.step.report.ledger_hold)
            await sync.sync()
            if decided is None:
                cluster.advance_to(min(t for t in (controller.next_due(),
                                                   cluster.next_event_at()) if t))  # fmt: skip
        assert decided["nodeclaim"] == big and decided["phase"] == "drain"
        r = await api.client.get("/v1/rotation/status", headers=await api.token("team-a"))
        assert r.status_code == 200, r.text
        (pool,) = r.json()
        assert pool["reason"] == "ledgerCapacity" and pool["rotating"] == big
        assert pool["ledger_hold"] == decided
        # ``fleetgate status -o wide`` shows the hold from the same body.
        wide = render([PoolRotationBody.model_validate(pool)], Output.wide, STATUS)
        header, row = wide.splitlines()
        assert "LEDGER_HOLD" in header.split()
        assert f"{decided['node']}: 2/5 stranded, missing cpus=8" in row
