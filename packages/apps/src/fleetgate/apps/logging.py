"""structlog configuration (called once per process by the CLI) and the request id it carries.

Every line leaves through a ``StderrHandler``, which passes its final text through
``redaction.redact``: whatever a logger wrote (ours, uvicorn's, SQLAlchemy's, a traceback), no
credential reaches the log. Tracebacks are plain text without local variables (a frame's locals
hold the settings, the request's headers, the connection's password) in the console format, and
the same text under ``exception`` in the JSON format.
"""

from __future__ import annotations

import logging
import re
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import structlog
from pydantic_core import to_json

from fleetgate.apps.redaction import redact


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler on whatever ``sys.stderr`` is when a record is written.

    ``StreamHandler(sys.stderr)`` keeps the stream it was given; where stderr is replaced (a
    CLI run in-process, as click's test runner does, or a daemon redirecting it) a later record
    would go to a closed stream and print a "Logging error" traceback instead of the line.
    """

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> object:
        """The current ``sys.stderr``."""
        return sys.stderr

    @stream.setter
    def stream(self, _value: object) -> None:
        pass  # always the current one

    def format(self, record: logging.LogRecord) -> str:
        """The formatter's text with every credential masked (the last step before output)."""
        return redact(super().format(record))


def _json_line(event: object, default: Callable[[object], object] | None = None) -> str:
    # pydantic-core's encoder (already a dependency) writes a line about three times faster than
    # the standard library's: a placement logs three, a 507 one with every candidate's refusal.
    return to_json(event, fallback=default, inf_nan_mode="constants").decode()


def configure_logging(fmt: str = "console", level: int = logging.INFO) -> None:
    """Route structlog and stdlib logging through one renderer (console or JSON) on stderr."""
    # Plain tracebacks: rich's default shows every frame's locals (the settings with the
    # database URL and the admin token, thousands of lines), and wraps lines where a mask
    # could no longer find a secret cut in two.
    renderers: list[structlog.types.Processor] = (
        [structlog.processors.format_exc_info, structlog.processors.JSONRenderer(_json_line)]
        if fmt == "json"
        else [
            structlog.dev.ConsoleRenderer(
                colors=sys.stderr.isatty(), exception_formatter=structlog.dev.plain_traceback
            )
        ]
    )
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso"),
    ]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = StderrHandler()
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *renderers],
        )
    )
    # No renderer shows a record's caller, thread or process, and a placement logs three lines:
    # the logging HOWTO's "Optimization" switches skip gathering them (a stack walk per line).
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Alembic announces each of its built-in plugins at every start: seven lines of noise before
    # the line an operator looks for (its migration lines stay).
    logging.getLogger("alembic.runtime.plugins").setLevel(max(level, logging.WARNING))


# --- request ids ----------------------------------------------------------------------------

#: The header a request id is read from and returned in.
REQUEST_ID_HEADER = "X-Request-ID"
_REQUEST_ID: ContextVar[str | None] = ContextVar("fleetgate_request_id", default=None)
# A caller's id is echoed into logs and headers, so it is held to a safe, bounded alphabet.
_SAFE_ID = re.compile(r"[A-Za-z0-9._:/+=-]{1,128}")


def request_id_from(header: str | None) -> str:
    """The caller's request id when it is safe to echo, else a fresh one."""
    if header is not None and _SAFE_ID.fullmatch(header):
        return header
    return uuid.uuid4().hex


def current_request_id() -> str | None:
    """The id of the request this task serves, if any."""
    return _REQUEST_ID.get()


@contextmanager
def request_scope(request_id: str) -> Iterator[None]:
    """Carry ``request_id`` in every log line (and audit event) made inside the block."""
    token = _REQUEST_ID.set(request_id)
    try:
        with structlog.contextvars.bound_contextvars(request_id=request_id):
            yield
    finally:
        _REQUEST_ID.reset(token)
