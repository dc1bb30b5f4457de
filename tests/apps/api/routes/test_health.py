"""Probes and metrics: unauthenticated; readiness follows the database."""

from __future__ import annotations

import httpx
from prometheus_client import Counter

from fleetgate.apps.api.app import create_app
from fleetgate.apps.container import build_container
from fleetgate.apps.settings import ApiSettings, Settings
from tests.apps.api.conftest import Api

# Nothing listens on port 1 of the loopback: connecting fails at once.
UNREACHABLE = "postgresql+asyncpg://nobody@127.0.0.1:1/fleetgate"


async def test_healthz_and_readyz_answer_without_a_token(api: Api) -> None:
    assert (await api.client.get("/healthz")).json() == {"status": "ok"}
    ready = await api.client.get("/readyz")
    assert (ready.status_code, ready.json()) == (200, {"status": "ready"})


async def test_readyz_is_503_while_the_database_does_not_answer_healthz_stays_200() -> None:
    container = build_container(
        Settings(database_url=UNREACHABLE, api=ApiSettings(admin_token="t"))
    )
    app = create_app(container)  # no lifespan: the ledger never connected
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://fleetgate") as client:
        ready = await client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["error"] == "unavailable"
        assert (await client.get("/healthz")).status_code == 200
        # An API call needing the database is a 503 in the error shape, never a 500.
        r = await client.get("/v1/nodes", headers={"Authorization": "Bearer t"})
        assert r.status_code == 503 and r.json()["error"] == "unavailable"
        # So is a namespace token that cannot be looked up: unknown is not the same as unverified.
        r = await client.get("/v1/events", headers={"Authorization": "Bearer fgt_x"})
        assert r.status_code == 503 and r.json()["error"] == "unavailable"
    await container.ledger().close()


async def test_metrics_serve_the_containers_registry(api: Api) -> None:
    probe = Counter(
        "fleetgate_test_probe",
        "A series only this test registers.",
        registry=api.container.metrics_registry(),
    )
    probe.inc(3)
    r = await api.client.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    assert "fleetgate_test_probe_total 3.0" in r.text
