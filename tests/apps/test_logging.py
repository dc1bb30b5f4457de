"""Log lines go to the stderr of the moment, not to the one present when logging was set up;
tracebacks are text without locals in both formats; no credential survives in any line."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Callable, Iterator

import pytest
import structlog

from fleetgate.apps.logging import StderrHandler, configure_logging


def test_a_record_goes_to_the_current_stderr_even_after_it_was_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handler = StderrHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    first, second = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    handler.emit(logging.makeLogRecord({"msg": "one"}))
    first.close()  # as an in-process CLI run closes the stream it lent
    monkeypatch.setattr(sys, "stderr", second)
    handler.emit(logging.makeLogRecord({"msg": "two"}))
    assert second.getvalue() == "two\n"


@pytest.fixture
def logged(capsys: pytest.CaptureFixture[str]) -> Iterator[Callable[[str], Callable[[], str]]]:
    """Configure logging in a format; what it wrote to stderr. Restored afterwards."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)

    def configure(fmt: str) -> Callable[[], str]:
        configure_logging(fmt)
        return lambda: capsys.readouterr().err

    try:
        yield configure
    finally:
        root.handlers[:], root.level = saved
        structlog.reset_defaults()


def _fail_with_a_secret_in_a_local() -> None:
    # A value no mask recognises: only leaving the locals out keeps it from the log.
    settings = "a-local-value-4711"  # noqa: F841 (the point)
    raise RuntimeError("boom")


@pytest.mark.parametrize("fmt", ["console", "json"])
def test_a_traceback_is_logged_as_text_without_locals(
    fmt: str, logged: Callable[[str], Callable[[], str]]
) -> None:
    written = logged(fmt)
    try:
        _fail_with_a_secret_in_a_local()
    except RuntimeError:
        structlog.get_logger("fleetgate.api").exception("unhandled error in the API")
        logging.getLogger("uvicorn.error").error("Exception in ASGI application", exc_info=True)
    out = written()
    assert "a-local-value-4711" not in out and "<traceback object" not in out
    if fmt == "json":
        lines = [json.loads(line) for line in out.splitlines()]
        assert len(lines) == 2, out
        for line in lines:  # the traceback kept, as text
            assert "_fail_with_a_secret_in_a_local" in line["exception"]
            assert line["exception"].rstrip().endswith("RuntimeError: boom")
    else:
        assert out.count("Traceback (most recent call last)") == 2, out
        assert out.count("RuntimeError: boom") == 2


@pytest.mark.parametrize("fmt", ["console", "json"])
def test_credentials_are_masked_in_every_logger_line(
    fmt: str, logged: Callable[[str], Callable[[], str]]
) -> None:
    written = logged(fmt)
    structlog.get_logger("fleetgate").warning(
        "connect failed", url="mysql+aiomysql://root:pw-structlog-1@db/x"
    )
    logging.getLogger("sqlalchemy.pool").warning("reset of postgresql://u:pw-stdlib-2@db/x failed")
    logging.getLogger("uvicorn.error").info("headers %r", [(b"authorization", b"Bearer tok-3")])
    out = written()
    assert len(out.splitlines()) == 3, out
    for secret in ("pw-structlog-1", "pw-stdlib-2", "tok-3"):
        assert secret not in out
    assert out.count("***") == 3
