"""The API under test: the real app over the database under test, driven by httpx in-process.

Each test gets a fresh container (virtual clock, seeded ranking) whose ledger is emptied, an
``httpx.AsyncClient`` on the ASGI app with the lifespan running, and helpers to make tokens.
"""

from __future__ import annotations

import functools
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pluggy
import pytest
from fastapi import FastAPI

from fleetgate.adapters import plugins
from fleetgate.adapters.clock import VirtualClock
from fleetgate.apps.api.app import create_app
from fleetgate.apps.container import Container, build_container
from fleetgate.apps.settings import ApiSettings, CapacitySettings, ClaimSettings, Settings
from tests.conftest import Backend
from tests.ledgers import START, empty

ADMIN_TOKEN = "test-admin-token-0123456789"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def bearer(secret: str) -> dict[str, str]:
    """The Authorization header for a token."""
    return {"Authorization": f"Bearer {secret}"}


@dataclass
class Api:
    """A running API: its client, the app, its container and virtual clock, and token helpers."""

    client: httpx.AsyncClient
    app: FastAPI
    container: Container
    clock: VirtualClock
    tokens: dict[str, str] = field(default_factory=dict)

    async def token(self, namespace: str) -> dict[str, str]:
        """Headers for a namespace token of ``namespace`` (created once by the admin)."""
        if namespace not in self.tokens:
            r = await self.client.post(f"/v1/admin/namespaces/{namespace}/tokens", headers=ADMIN)
            assert r.status_code == 201, r.text
            self.tokens[namespace] = r.json()["secret"]
        return bearer(self.tokens[namespace])

    async def node(self, name: str, threads: int = 8, **body: Any) -> dict[str, Any]:
        """Add (or replace) a node as the admin; returns its body."""
        payload = {"threads": threads, "memory_mb": 32768, "disk_gb": 500, **body}
        r = await self.client.put(f"/v1/nodes/{name}", json=payload, headers=ADMIN)
        assert r.status_code in (200, 201), r.text
        result: dict[str, Any] = r.json()
        return result


def api_settings(backend: Backend, **overrides: Any) -> Settings:
    """Settings for the backend with the test admin token and a seeded ranking."""
    return Settings(
        database_url=backend.url,
        database_session_variables=dict(backend.session_variables),
        api=ApiSettings(admin_token=ADMIN_TOKEN),
        capacity=overrides.pop("capacity", CapacitySettings(ranking_seed=7)),
        claims=overrides.pop("claims", ClaimSettings()),
        **overrides,
    )


@functools.cache
def shared_plugin_manager() -> pluggy.PluginManager:
    """One plugin manager for every test app: scanning the entry points is the slow part."""
    return plugins.plugin_manager()


async def running_api(settings: Settings) -> AsyncIterator[Api]:
    """Start the app's lifespan over ``settings``, empty the ledger, and yield a client."""
    clock = VirtualClock(START)
    container = build_container(settings, clock=clock, plugin_manager=shared_plugin_manager())
    app = create_app(container)
    # No wall-clock bound on simulations unless a test sets one: whether a simulation finishes
    # must not depend on how busy the machine is (the bound's own tests set theirs).
    app.state.simulate_seconds = math.inf
    async with app.router.lifespan_context(app):
        await empty(container.ledger())
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://fleetgate") as client:
            yield Api(client, app, container, clock)


@pytest.fixture
async def api(backend: Backend) -> AsyncIterator[Api]:
    """The API on the database under test, advisory claims."""
    async for running in running_api(api_settings(backend)):
        yield running


@pytest.fixture(scope="session")
def sqlite_backend(tmp_path_factory: pytest.TempPathFactory) -> Backend:
    """A SQLite database of the API tests' own, whatever the backend under test."""
    return Backend(
        url=f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('api') / 'api.db'}", kind="sqlite"
    )


@pytest.fixture
async def sqlite_api(sqlite_backend: Backend) -> AsyncIterator[Api]:
    """The API on SQLite, for tests whose subject is not SQL (the authorization rules): they
    run once, in the plain test session, rather than again in every database session."""
    async for running in running_api(api_settings(sqlite_backend)):
        yield running


@pytest.fixture
async def hard_api(backend: Backend) -> AsyncIterator[Api]:
    """The API with claims enforced hard (a claim refuses its namespace's overage with 403)."""
    async for running in running_api(
        api_settings(backend, claims=ClaimSettings(enforcement="hard"))
    ):
        yield running
