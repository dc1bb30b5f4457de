"""FastAPI dependencies shared by the routes: the container and the services it provides."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import Request

if TYPE_CHECKING:
    from fleetgate.apps.container import Container


def container_of(request: Request) -> Container:
    """The composition root the app was built with."""
    container: Container = request.app.state.container
    return container
