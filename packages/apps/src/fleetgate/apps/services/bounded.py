"""CPU-bound work in a thread of its own, answered within a wall-clock bound and then stopped.

The one way fleetgate bounds a simulation's run time: ``POST /v1/rotation/simulate``, the What-if
page and ``fleetgate simulate`` (whose bound is infinite: Ctrl-C stops it the same way) all run
through :func:`run_bounded`, by way of :class:`~fleetgate.apps.services.simulation.Simulator`.

The work is handed a ``check`` to call as it goes; once the bound has passed (or the caller was
cancelled), ``check`` raises :class:`RanTooLong` and the work unwinds cleanly from a point of
its own choosing. The simulator calls it each time virtual time moves and before each thing the
fake cluster applies on its own, so no step of a simulation runs long between two checks.

At the bound the thread is told to stop and waited for (the event loop serving meanwhile), so
a refused simulation does not go on holding a core and the GIL after its answer: the caller is
answered once it has stopped (at its next check, within milliseconds), or after a few seconds
at most, with the thread reported as still running. Nothing is raised into the thread from
outside: an exception injected at an arbitrary bytecode can land in a finaliser or weak-reference
callback of any object the thread happens to free (the server's, not the simulation's) and cut
that cleanup short.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

import structlog

__all__ = ["RanTooLong", "run_bounded"]

T = TypeVar("T")
Check = Callable[..., None]
#: How long a stopped thread is waited for before it is reported as still running.
STOP_GRACE_SECONDS = 5.0

_log = structlog.get_logger("fleetgate.api")


class RanTooLong(BaseException):
    """The work did not finish within its wall-clock bound.

    A ``BaseException``, like ``KeyboardInterrupt``: raised by ``check`` deep inside the work, it
    must not be taken for one of the work's own errors by an ``except Exception`` on the way out
    (the controller's passes keep going past such errors, by design).
    """


async def run_bounded(work: Callable[[Check], T], seconds: float) -> T:
    """``work(check)`` in a new thread; raises :class:`RanTooLong` after ``seconds``.

    The event loop keeps serving meanwhile. A cancelled caller stops the work the same way.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()
    deadline = loop.time() + seconds
    stop = threading.Event()

    def check(*_: Any) -> None:
        # The loop's clock is monotonic and readable from any thread.
        if stop.is_set() or loop.time() > deadline:
            raise RanTooLong

    def settle(result: Any, error: BaseException | None) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)

    def run() -> None:
        try:
            result = work(check)
        except BaseException as exc:  # everything goes back to the caller, RanTooLong included
            loop.call_soon_threadsafe(settle, None, exc)
        else:
            loop.call_soon_threadsafe(settle, result, None)

    # Once the caller has been answered nobody reads the outcome; say so, or asyncio logs it.
    done.add_done_callback(lambda future: future.cancelled() or future.exception())
    thread = threading.Thread(target=run, name="fleetgate-bounded", daemon=True)
    thread.start()
    try:
        await asyncio.wait({done}, timeout=seconds)
    finally:
        if not done.done():
            stop.set()  # its next check raises
        # Also when the work has answered: the thread may still be on its way out of ``run``,
        # and no caller should find it alive once answered.
        await _stopped(thread)
    if done.done():
        return done.result()
    raise RanTooLong


async def _stopped(thread: threading.Thread) -> None:
    """Wait for a stopped thread to end, a few seconds at most (the loop serves meanwhile)."""
    await asyncio.to_thread(thread.join, STOP_GRACE_SECONDS)
    if thread.is_alive():
        frame = sys._current_frames().get(thread.ident or 0)
        where = "".join(traceback.format_stack(frame)[-3:]) if frame is not None else "unknown"
        _log.warning(
            "a bounded worker thread did not stop at its check", thread=thread.name, where=where
        )
