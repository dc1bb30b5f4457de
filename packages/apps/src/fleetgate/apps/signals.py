"""Stopping long-running commands cleanly on SIGINT and SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Iterator

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def on_stop_signals(callback: Callable[[], object]) -> Iterator[None]:
    """Call ``callback`` on SIGINT/SIGTERM while inside the block (in the running loop).

    Where the loop cannot install handlers (not the main thread, another platform) nothing is
    installed and the default behaviour (KeyboardInterrupt) stays.
    """
    loop = asyncio.get_running_loop()
    installed = []
    for sig in STOP_SIGNALS:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, callback)
            installed.append(sig)
    try:
        yield
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


def stop_on_signals(stop: asyncio.Event) -> contextlib.AbstractContextManager[None]:
    """Set ``stop`` on SIGINT/SIGTERM while inside the block."""
    return on_stop_signals(stop.set)


def cancelled_on_signals() -> contextlib.AbstractContextManager[None]:
    """Cancel the current task on SIGINT/SIGTERM (so its ``finally`` blocks release things)."""
    task = asyncio.current_task()
    assert task is not None, "cancelled_on_signals() needs a running task"
    return on_stop_signals(task.cancel)
