"""structlog configuration (called once per process by the CLI) and the request id it carries."""

from __future__ import annotations

import logging
import re
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import structlog


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


def configure_logging(fmt: str = "console", level: int = logging.INFO) -> None:
    """Route structlog and stdlib logging through one renderer (console or JSON) on stderr."""
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
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
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


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
