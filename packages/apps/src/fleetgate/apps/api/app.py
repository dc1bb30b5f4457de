"""The FastAPI application factory: routes, error shape, authentication, and the ledger's life."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from fastapi import FastAPI

from fleetgate.apps.api.auth import Authenticator
from fleetgate.apps.api.docs import install_docs
from fleetgate.apps.api.errors import install_error_handlers
from fleetgate.apps.api.limits import MAX_BODY_BYTES, BodyLimit
from fleetgate.apps.api.metrics import ApiMetrics, ObservedRequests
from fleetgate.apps.api.routes import (
    admin,
    claims,
    events,
    health,
    nodes,
    placements,
    rotation,
    rotation_status,
    tokens,
)
from fleetgate.apps.api.schemas.rotation import SIMULATE_SECONDS
from fleetgate.domain.ports import LedgerLifecycle

if TYPE_CHECKING:
    from fleetgate.apps.container import Container

_DESCRIPTION = """\
Guarded capacity admission and maintenance-window rotation checks.

Every `/v1` operation needs `Authorization: Bearer <token>`: the admin token from configuration,
or a namespace token the admin created (which acts only in its own namespace). Every error has
one JSON shape: `{"error": "<code>", "message": "<text>", ...details}`.
"""


def _version() -> str:
    try:
        return version("fleetgate")
    except PackageNotFoundError:  # a source tree without installed metadata
        return "0+unknown"


def create_app(container: Container, *, start_ledger: bool = True) -> FastAPI:
    """The API over ``container``'s ledger, services and metrics registry.

    The lifespan starts the ledger (migrating its schema) and closes it on shutdown, unless
    ``start_ledger`` is false: ``fleetgate api`` starts it before serving, so that a database it
    cannot reach is one ``error:`` line rather than uvicorn's lifespan traceback. The admin
    token is ``settings.api.admin_token``; without one, only namespace tokens authenticate.
    """
    settings = container.settings()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if not start_ledger:
            yield
            return
        ledger: LedgerLifecycle = container.ledger()
        await ledger.start()
        try:
            yield
        finally:
            await ledger.close()

    app = FastAPI(
        title="fleetgate",
        version=_version(),
        description=_DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # install_docs serves /docs from local assets (no CDN)
        redoc_url=None,
    )
    install_docs(app)
    app.state.container = container
    app.state.authenticator = Authenticator(settings.api.admin_token, container.token_store())
    # The wall-clock bound of one POST /v1/rotation/simulate (a test's app may set a shorter one).
    app.state.simulate_seconds = SIMULATE_SECONDS
    install_error_handlers(app)
    app.add_middleware(BodyLimit, max_bytes=MAX_BODY_BYTES)
    # Outermost: the request id and the timing cover everything the app does, errors included.
    app.state.api_metrics = ApiMetrics(container.metrics_registry())
    app.add_middleware(
        ObservedRequests, metrics=app.state.api_metrics, virtual_clock=container.virtual_clock()
    )
    routers = [
        m.router for m in (health, nodes, placements, claims, admin, tokens, events, rotation)
    ]
    routers.append(rotation_status.router)  # its own module, beside rotation.py's endpoints
    for router in routers:
        app.include_router(router)
    app.state.routes = [route for router in routers for route in router.routes]
    return app
