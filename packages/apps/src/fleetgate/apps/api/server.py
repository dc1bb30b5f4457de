"""``fleetgate api``: serve the HTTP API with uvicorn, one process, over the configured ledger.

Without ``api.admin_token`` (``FLEETGATE_API__ADMIN_TOKEN``) in the configuration, a random admin
token is generated for this run and printed once on standard error: it is never stored, so a
restart makes a new one. Configure a token for anything but a trial.
"""

from __future__ import annotations

import secrets
import signal
import sys
from types import FrameType

import uvicorn

from fleetgate.apps.container import build_container
from fleetgate.apps.logging import configure_logging
from fleetgate.apps.settings import ConfigError, Settings, load_settings

EXIT_OK, EXIT_FAILED, EXIT_INVALID = 0, 1, 2


def with_admin_token(settings: Settings) -> tuple[Settings, str | None]:
    """``settings`` with an admin token, and the token if one had to be generated."""
    if settings.api.admin_token:
        return settings, None
    token = secrets.token_urlsafe(32)
    api = settings.api.model_copy(update={"admin_token": token})
    return settings.model_copy(update={"api": api}), token


def _interrupted(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def run_api(host: str | None, port: int | None) -> int:
    """Serve until interrupted; 0 after a clean shutdown, 1 if start-up failed, 2 bad config."""
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    configure_logging(settings.log_format)
    settings, generated = with_admin_token(settings)
    if generated is not None:
        print(
            "fleetgate api: no admin token configured (api.admin_token); "
            f"generated one for this run:\n{generated}",
            file=sys.stderr,
            flush=True,
        )
    app = build_container(settings).api_app()
    config = uvicorn.Config(
        app,
        host=host or settings.api.host,
        port=settings.api.port if port is None else port,
        lifespan="on",
        log_config=None,  # our structlog configuration handles uvicorn's loggers too
        proxy_headers=False,
    )
    server = uvicorn.Server(config)
    # uvicorn shuts down gracefully on SIGINT/SIGTERM, then re-raises the signal; with these
    # handlers that ends here as KeyboardInterrupt, so a requested stop exits 0.
    previous = {s: signal.signal(s, _interrupted) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.run()
    except KeyboardInterrupt:
        pass  # the stop we were asked for
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return EXIT_OK if server.started else EXIT_FAILED
