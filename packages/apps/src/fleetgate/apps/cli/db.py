"""``fleetgate db``: migrate the configured database with the ledger's own migrations, and show
where it stands (``db current``) and what the installed version ships (``db history``).

Every message names the database with its password hidden.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

from rich.console import Console

from fleetgate.adapters.plugins import PluginNotFound, redact_url, redact_urls
from fleetgate.apps.container import build_container
from fleetgate.apps.redaction import error_markup
from fleetgate.apps.settings import ConfigError
from fleetgate.domain.capacity.errors import LedgerError
from fleetgate.domain.ports import CapacityLedger

_out = Console(soft_wrap=True, highlight=False)
_err = Console(stderr=True, soft_wrap=True, highlight=False)


@runtime_checkable
class SchemaHistory(Protocol):
    """A ledger whose schema has versions (the SQL ledgers; a plugin may have none)."""

    async def schema_revision(self) -> str | None:
        """The revision the database is at."""

    def schema_history(self) -> list[tuple[str, str]]:
        """Every revision shipped, oldest first, with its description."""


def _versioned(ledger: CapacityLedger) -> SchemaHistory:
    """The ledger as one with schema revisions, or a LedgerError saying it has none."""
    if not isinstance(ledger, SchemaHistory):
        raise LedgerError(f"the {type(ledger).__name__} ledger has no schema revisions")
    return ledger


def _configured() -> tuple[CapacityLedger, str] | int:
    """The configured ledger and its displayable URL, or the exit status (2) after the error."""
    try:
        container = build_container()
        settings = container.settings()
        return container.ledger(), redact_url(settings.database_url)
    except (ConfigError, PluginNotFound, ValueError) as exc:
        _err.print(error_markup(str(exc)))
        return 2


def _run(doing: str, job: Callable[[CapacityLedger], Awaitable[Any]]) -> tuple[Any, str] | int:
    """Run ``job`` on the configured ledger, closing it; errors are one line (exit 1 or 2)."""
    configured = _configured()
    if isinstance(configured, int):
        return configured
    ledger, target = configured

    async def run() -> Any:
        try:
            return await job(ledger)
        finally:
            await ledger.close()

    try:
        return asyncio.run(run()), target
    except LedgerError as exc:
        _err.print(error_markup(f"{doing} {target}: {exc}"))
    except Exception as exc:  # Alembic and driver errors: report, do not dump a traceback
        message = " ".join(redact_urls(str(exc)).split())
        _err.print(error_markup(f"{doing} {target}: {message}"))
    return 1


def run_upgrade(revision: str) -> int:
    """Migrate to ``revision``; 0 on success, 1 if the database failed, 2 for bad configuration."""
    done = _run("migrating", lambda ledger: ledger.migrate(revision))
    if isinstance(done, int):
        return done
    current, target = done
    _out.print(f"{target}: database at revision {current or '(empty)'}")
    return 0


def run_current() -> int:
    """Print the revision the configured database is at, changing nothing."""

    async def read(ledger: CapacityLedger) -> str | None:
        return await _versioned(ledger).schema_revision()

    done = _run("reading the revision of", read)
    if isinstance(done, int):
        return done
    current, target = done
    _out.print(f"{target}: database at revision {current or '(empty: run `fleetgate db upgrade`)'}")
    return 0


def run_history() -> int:
    """Print every revision the installed fleetgate ships, marking the database's current one."""

    async def read(ledger: CapacityLedger) -> tuple[list[tuple[str, str]], str | None]:
        versioned = _versioned(ledger)
        return versioned.schema_history(), await versioned.schema_revision()

    done = _run("reading the history of", read)
    if isinstance(done, int):
        return done
    (revisions, current), target = done
    _out.print(f"{target}:")
    for revision, doc in revisions:
        mark = " (current)" if revision == current else ""
        _out.print(f"  {revision}{mark}  {doc}")
    return 0
