"""CPU-bound work in a thread of its own, answered within a wall-clock bound and then stopped.

The work is handed a ``check`` to call as it goes (the simulator calls its progress callback each
time virtual time moves): once the bound has passed, ``check`` raises :class:`RanTooLong` and the
work unwinds cleanly. That is not enough on its own: one step of the work can run long between
two checks (when the simulator jumps ahead, the fake cluster applies everything due meanwhile in
one call, and a 1-microsecond ``expireAfter`` or a whole fleet expiring at once keeps that call
busy for minutes), and a thread nobody waits for would keep a core and the GIL busy after its
request was answered. So a thread still working just past the bound is interrupted where it
stands: CPython raises :class:`RanTooLong` in it at its next bytecode
(``PyThreadState_SetAsyncExc``), and the caller is answered once it has stopped (milliseconds).
The simulation runs pure Python on state of its own (its cluster, clock and event loop), so it
unwinds from any point; see :func:`_stopped` for the one place an interruption can be lost.
"""

from __future__ import annotations

import asyncio
import ctypes
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

import structlog

__all__ = ["RanTooLong", "run_bounded"]

T = TypeVar("T")
Check = Callable[..., None]
#: How long past the bound the work's own check is given to stop it before it is interrupted.
CHECK_GRACE_SECONDS = 0.05
#: How long an interrupted thread is waited for before it is given up (and logged), and how long
#: it may run on before it is interrupted again.
STOP_GRACE_SECONDS = 5.0
REINTERRUPT_SECONDS = 0.5

_log = structlog.get_logger("fleetgate.api")


class RanTooLong(BaseException):
    """The work did not finish within its wall-clock bound.

    A ``BaseException``, like ``KeyboardInterrupt``: raised into the work at any point, it must
    not be taken for one of the work's own errors by an ``except Exception`` on the way out (the
    controller's passes keep going past such errors, by design).
    """


class _Worker:
    """The thread's side of the hand-over: whether it is still inside the work, and whether the
    work's own check has already stopped it (it is unwinding, and must not be cut short)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.finished = False
        self.stopping = False

    def interrupt(self, thread: threading.Thread) -> bool:
        """Raise RanTooLong inside ``thread`` if it is still working; True if it was."""
        # Under the lock the thread cannot leave the work unseen: it marks itself finished
        # under the same lock, inside the block that catches what is raised in it.
        with self.lock:
            if self.finished or self.stopping or thread.ident is None:
                return False
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(thread.ident), ctypes.py_object(RanTooLong)
            )
            return True


async def run_bounded(work: Callable[[Check], T], seconds: float) -> T:
    """``work(check)`` in a new thread; raises :class:`RanTooLong` after ``seconds``.

    The event loop keeps serving meanwhile. A cancelled caller stops the thread the same way.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()
    deadline = loop.time() + seconds
    worker = _Worker()

    def check(*_: Any) -> None:
        if loop.time() > deadline:  # the loop's clock is monotonic and readable from any thread
            with worker.lock:
                worker.stopping = True
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
            try:
                result = work(check)
            finally:
                with worker.lock:
                    worker.finished = True
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
        if not done.done():
            # The work's own check stops it at its next step; only a step that runs on is
            # interrupted (an interruption that lands in a finaliser is lost, so it is the
            # exception, not the rule).
            await asyncio.wait({done}, timeout=CHECK_GRACE_SECONDS)
    finally:
        if not done.done():
            worker.interrupt(thread)  # unless its check already stopped it, or it finished
            await _stopped(thread, worker)
    if done.done():
        return done.result()
    raise RanTooLong


async def _stopped(thread: threading.Thread, worker: _Worker) -> None:
    """Wait for a stopped or interrupted thread to end, a few seconds at most.

    An interruption that lands while the thread runs a finaliser or a garbage-collector callback
    (whoever's objects they are, they run on the thread that frees them) is reported as ignored
    and lost, so a thread still running a while later is interrupted again; not sooner, so that
    its own unwinding (closing the simulation's event loop) is not cut short.
    """
    began = time.monotonic()
    again = began + REINTERRUPT_SECONDS
    while thread.is_alive() and time.monotonic() - began < STOP_GRACE_SECONDS:
        await asyncio.sleep(0.01)
        if time.monotonic() >= again:
            worker.interrupt(thread)
            again += REINTERRUPT_SECONDS
    if thread.is_alive():
        frame = sys._current_frames().get(thread.ident or 0)
        where = "".join(traceback.format_stack(frame)[-3:]) if frame is not None else "unknown"
        _log.warning(
            "a bounded worker thread did not stop when interrupted", thread=thread.name, where=where
        )
