"""The dashboard: ``/`` (server-rendered HTML), ``/dashboard/data`` (JSON), static files.

It is mounted by ``fleetgate up`` next to the API (``install_dashboard``), over a *source*: an
async function returning a snapshot mapping (``fleetgate.apps.up.status`` builds one).

Access needs the admin token, always, even on localhost (other users of the machine can reach a
loopback port too). ``fleetgate up`` prints links carrying it: ``/?token=…`` (and
``/whatif?token=…``) checks the token, opens a server-side session (``sessions.py``: the cookie,
HttpOnly and SameSite=Strict, holds only an opaque random id, never the token) and redirects to
the same page without the query, so the token leaves the address bar and the history at once.
``/dashboard/data`` accepts that session cookie or an ``Authorization: Bearer`` admin token;
``POST /dashboard/signout`` ends the session. Nothing under ``/v1`` changes: the API still takes
bearer tokens only, with its own rules. Pages are sent with a strict Content-Security-Policy, no
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
from fleetgate.apps.api.dashboard.sessions import Sessions
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

    def __init__(
        self, source: Source, admin_token: str | None, sessions: Sessions | None = None
    ) -> None:
        self.source = source
        self.admin_token = admin_token or None
        self.sessions = sessions or Sessions()

    def _valid(self, token: str | None) -> bool:
        return (
            self.admin_token is not None
            and token is not None
            and tokens.same_secret(token, self.admin_token)
        )

    def authorized(self, request: Request) -> bool:
        """The request carries a live admin session cookie, or the admin token as a bearer."""
        if self.sessions.principal(request.cookies.get(COOKIE), self.admin_token) == "admin":
            return True
        return self._valid(bearer_token(request.headers.get("authorization")))

    def sign_in(self, request: Request) -> Response | None:
        """The answer to ``?token=`` on a page: a session and a redirect to the bare page, or the
        form again for a wrong token; None when the address has no token."""
        token = request.query_params.get("token")
        if token is None:
            return None
        if not self._valid(token):
            return _html(render.login("That is not the admin token.", request.url.path), 401)
        response = RedirectResponse(request.url.path, status_code=303, headers=HEADERS)
        response.set_cookie(
            COOKIE,
            self.sessions.open(token),
            max_age=int(self.sessions.ttl),
            httponly=True,
            samesite="strict",
            path="/",
        )
        return response

    def refused(self, request: Request) -> Response:
        """The sign-in form, for a page asked for without a session."""
        return _html(render.login("The dashboard needs the admin token.", request.url.path), 401)

    async def index(self, request: Request) -> Response:
        """``/``: sign in with ``?token=``, or the page itself, or the sign-in form."""
        signed_in = self.sign_in(request)
        if signed_in is not None:
            return signed_in
        if not self.authorized(request):
            return self.refused(request)
        return _html(render.page(await self.source()))

    async def sign_out(self, request: Request) -> Response:
        """``POST /dashboard/signout``: end this browser's session."""
        self.sessions.close(request.cookies.get(COOKIE))
        response = RedirectResponse("/", status_code=303, headers=HEADERS)
        response.delete_cookie(COOKIE, path="/")
        return response

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
        router.add_api_route("/dashboard/signout", self.sign_out, methods=["POST"])
        return router


def _html(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status, headers=HEADERS)


def install_dashboard(app: FastAPI, source: Source, admin_token: str | None) -> Dashboard:
    """Mount the dashboard on ``app``: ``/``, ``/dashboard/data`` and ``/dashboard/static``."""
    dashboard = Dashboard(source, admin_token)
    app.include_router(dashboard.router())
    whatif.install(app, dashboard, HEADERS)
    app.mount("/dashboard/static", StaticFiles(directory=STATIC), name="dashboard-static")
    return dashboard


__all__ = ["COOKIE", "HEADERS", "Dashboard", "install_dashboard", "page_headers"]
