"""How a command that cannot start says so: one ``error:`` line on stderr and a documented exit.

``StartupFailed`` travels up to ``cli.main``, which prints its message as the one line (exit 1;
``--debug`` shows the traceback instead). Invalid configuration is exit 2 (``invalid``).
"""

from __future__ import annotations

import sys

from fleetgate.adapters.plugins import redact_urls
from fleetgate.apps.redaction import redact
from fleetgate.domain.ports import LedgerLifecycle

EXIT_FAILED, EXIT_INVALID = 1, 2


class StartupFailed(RuntimeError):
    """A command could not start; the message is the one line ``fleetgate`` prints (exit 1)."""


async def start_ledger(ledger: LedgerLifecycle, url: str) -> None:
    """Start ``ledger`` (connect, migrate), or StartupFailed naming the database (no password)."""
    try:
        await ledger.start()
    except Exception as exc:
        raise StartupFailed(f"cannot start the ledger at {redact_urls(url)}: {exc}") from exc


def invalid(message: str) -> int:
    """Print ``error: <message>`` (invalid configuration or input) on stderr; the exit (2)."""
    print(f"error: {redact(message)}", file=sys.stderr, flush=True)
    return EXIT_INVALID
