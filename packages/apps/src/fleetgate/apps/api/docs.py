"""``/docs``: Swagger UI served from an installed package, so it works without network access.

FastAPI's own ``/docs`` loads Swagger UI's script and stylesheet from a CDN, which leaves a blank
page in an air-gapped network. The assets come from the ``fastapi-offline`` distribution's static
directory instead, mounted under ``/docs/static``. The page carries the same strict
Content-Security-Policy as the dashboard: scripts, styles and images only from this origin, plus
the SHA-256 of the page's one inline script (Swagger UI's start-up call), and nothing else.
"""

from __future__ import annotations

import base64
import hashlib
import re
from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from fleetgate.apps.api.dashboard import page_headers

DOCS = "/docs"
STATIC_PATH = "/docs/static"
#: The installed assets (Swagger UI's bundle and CSS, ReDoc, a favicon).
ASSETS = Path(str(files("fastapi_offline") / "static"))
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def _script_hashes(html: str) -> list[str]:
    """The CSP source for each inline script of ``html``: its SHA-256, base64."""
    return [
        "'sha256-" + base64.b64encode(hashlib.sha256(body.encode()).digest()).decode() + "'"
        for body in _INLINE_SCRIPT.findall(html)
    ]


def install_docs(app: FastAPI) -> None:
    """Serve ``/docs`` and its assets on ``app`` (created with ``docs_url=None``)."""
    page = get_swagger_ui_html(
        openapi_url=app.openapi_url or "/openapi.json",
        title=f"{app.title} - API documentation",
        swagger_js_url=f"{STATIC_PATH}/swagger-ui-bundle.js",
        swagger_css_url=f"{STATIC_PATH}/swagger-ui.css",
        swagger_favicon_url=f"{STATIC_PATH}/favicon.png",
        oauth2_redirect_url=None,  # the API uses bearer tokens, not an OAuth2 flow
    )
    body = bytes(page.body).decode()
    headers = page_headers(*_script_hashes(body))

    async def docs() -> HTMLResponse:
        return HTMLResponse(body, headers=headers)

    app.add_api_route(DOCS, docs, methods=["GET"], include_in_schema=False)
    app.mount(STATIC_PATH, StaticFiles(directory=ASSETS), name="docs-static")
