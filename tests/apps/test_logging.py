"""Log lines go to the stderr of the moment, not to the one present when logging was set up."""

from __future__ import annotations

import io
import logging
import sys

import pytest

from fleetgate.apps.logging import StderrHandler


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
