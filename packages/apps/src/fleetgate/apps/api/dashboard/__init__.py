"""The dashboard: ``/`` (server-rendered HTML), ``/dashboard/data`` (JSON), static files.

It is mounted by ``fleetgate up`` next to the API (``install_dashboard``), over a *source*: an
async function returning a snapshot mapping (``fleetgate.apps.up.status`` builds one).

Access needs the admin token, always, even on localhost (other users of the machine can reach a
loopback port too). ``fleetgate up`` prints a link carrying it: ``/?token=…`` checks the token,
keeps it in an HttpOnly, SameSite=Strict cookie and redirects to ``/``, so the token leaves the
address bar and the history at once. ``/dashboard/data`` accepts that cookie or an
``Authorization: Bearer`` admin token. Nothing under ``/v1`` changes: the API still takes bearer
tokens only, with its own rules. Pages are sent with a strict Content-Security-Policy, no
caching, no framing and no referrer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.routing import APIRouter
from fastapi.staticfiles import StaticFiles

from fleetgate.apps.api.auth import bearer_token
from fleetgate.apps.api.dashboard import render, whatif
from fleetgate.domain import tokens

Source = Callable[[], Awaitable[Mapping[str, Any]]]
COOKIE = "fleetgate_dashboard"
STATIC = Path(__file__).with_name("static")


def page_headers(*script_sources: str) -> dict[str, str]:
    """The strict page headers; ``script_sources`` (e.g. a ``'sha256-…'``) join ``'self'``."""
    scripts = " ".join(("'self'", *script_sources))
    return {
        "Cache-Control": "no-store",
        "Content-Security-Policy": (
            f"default-src 'none'; script-src {scripts}; style-src 'self'; img-src 'self' data:; "
            "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        ),
        "Referrer-Policy": "no-referrer",
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
    }


HEADERS = page_headers()


class Dashboard:
    """The dashboard's routes over one snapshot source, guarded by the admin token."""

    def __init__(self, source: Source, admin_token: str | None) -> None:
        self.source = source
        self.admin_token = admin_token or None

    def _valid(self, token: str | None) -> bool:
        return (
            self.admin_token is not None
            and token is not None
            and tokens.same_secret(token, self.admin_token)
        )

    def authorized(self, request: Request) -> bool:
        """The request carries the admin token, in the cookie or as a bearer token."""
        bearer = bearer_token(request.headers.get("authorization"))
        return self._valid(request.cookies.get(COOKIE)) or self._valid(bearer)

    async def index(self, request: Request) -> Response:
        """``/``: sign in with ``?token=``, or the page itself, or the sign-in form."""
        token = request.query_params.get("token")
        if token is not None:
            if not self._valid(token):
                return _html(render.login("That is not the admin token."), 401)
            response = RedirectResponse("/", status_code=303, headers=HEADERS)
            response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")
            return response
        if not self.authorized(request):
            return _html(render.login("The dashboard needs the admin token."), 401)
        return _html(render.page(await self.source()))

    async def data(self, request: Request) -> Response:
        """``/dashboard/data``: the snapshot and every section rendered, as JSON."""
        if not self.authorized(request):
            return JSONResponse(
                {"error": "unauthorized", "message": "the dashboard needs the admin token"},
                status_code=401,
                headers={**HEADERS, "WWW-Authenticate": "Bearer"},
            )
        snapshot = await self.source()
        return JSONResponse({"data": snapshot, "html": render.sections(snapshot)}, headers=HEADERS)

    def router(self) -> APIRouter:
        """The routes (kept out of the OpenAPI document: they are not part of the API)."""
        router = APIRouter(include_in_schema=False)
        router.add_api_route("/", self.index, methods=["GET"], response_class=HTMLResponse)
        router.add_api_route("/dashboard/data", self.data, methods=["GET"])
        return router


def _html(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status, headers=HEADERS)


def install_dashboard(app: FastAPI, source: Source, admin_token: str | None) -> Dashboard:
    """Mount the dashboard on ``app``: ``/``, ``/dashboard/data`` and ``/dashboard/static``."""
    dashboard = Dashboard(source, admin_token)
    app.include_router(dashboard.router())
    whatif.install(app, dashboard.authorized, HEADERS)
    app.mount("/dashboard/static", StaticFiles(directory=STATIC), name="dashboard-static")
    return dashboard


__all__ = ["COOKIE", "HEADERS", "Dashboard", "install_dashboard", "page_headers"]
