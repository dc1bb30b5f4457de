"""Where the client finds the API by default: light constants the CLI reads before the client
itself loads (``fleetgate --help`` and ``fleetgate check`` need nothing more)."""

from __future__ import annotations

SERVER_ENV, TOKEN_ENV = "FLEETGATE_SERVER", "FLEETGATE_TOKEN"
DEFAULT_SERVER = "http://127.0.0.1:8000"
