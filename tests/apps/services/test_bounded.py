"""run_bounded: work in a thread of its own, answered within its bound, and stopped at its check."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest

from fleetgate.apps.services.bounded import RanTooLong, run_bounded
from tests.waiting import HANG_SECONDS

BOUND = 0.3


def _bounded_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "fleetgate-bounded"]


async def test_work_that_finishes_in_time_gives_its_result() -> None:
    assert await run_bounded(lambda check: check() or 42, BOUND) == 42
    assert not _bounded_threads()  # answered only once its thread has ended


async def test_an_error_of_the_work_reaches_the_caller() -> None:
    def fail(_: Callable[..., None]) -> None:
        raise ValueError("bad input")

    with pytest.raises(ValueError, match="bad input"):
        await run_bounded(fail, BOUND)


async def test_work_that_checks_is_stopped_at_the_bound() -> None:
    stopped_by_check = threading.Event()

    def checking(check: Callable[..., None]) -> None:
        try:
            while True:
                check()
                time.sleep(0.001)
        except RanTooLong:
            stopped_by_check.set()
            raise

    began = time.monotonic()
    with pytest.raises(RanTooLong):
        await run_bounded(checking, BOUND)
    # Not before the bound (a lower bound no machine can miss); how soon after it depends on
    # the machine, so the proof it stopped is that its own check raised, not a stopwatch.
    assert time.monotonic() - began >= BOUND
    assert stopped_by_check.is_set()
    assert not _bounded_threads()


async def test_work_between_two_checks_is_not_cut_short_but_stopped_at_the_next() -> None:
    # A long step with no check in it (nothing is injected into the thread from outside):
    # the caller is answered once the step is over and the next check has stopped the work.
    step = 1.0
    after_step: list[str] = []

    def one_long_step(check: Callable[..., None]) -> None:
        time.sleep(step)  # no check in here
        after_step.append("reached")
        check()
        after_step.append("went on")

    began = time.monotonic()
    with pytest.raises(RanTooLong):
        await run_bounded(one_long_step, BOUND)
    assert time.monotonic() - began >= step  # answered only once the step was over
    assert after_step == ["reached"]
    assert not _bounded_threads()


async def test_the_event_loop_keeps_serving_while_work_runs() -> None:
    # The work spins until the event loop has run a callback of its own: it can only end if
    # the loop serves while the work holds a thread busy (else the generous bound stops it).
    served = threading.Event()

    def busy(check: Callable[..., None]) -> str:
        while not served.is_set():
            check()
        return "served"

    work = asyncio.create_task(run_bounded(busy, HANG_SECONDS))
    await asyncio.sleep(0.01)
    assert _bounded_threads() and not work.done()  # the work is spinning meanwhile
    served.set()
    assert await work == "served"


async def test_a_cancelled_caller_stops_the_work() -> None:
    def busy(check: Callable[..., None]) -> None:
        while True:
            check()

    work = asyncio.create_task(run_bounded(busy, 60.0))
    await asyncio.sleep(0.1)
    assert _bounded_threads()
    work.cancel()
    with pytest.raises(asyncio.CancelledError):
        await work
    assert not _bounded_threads()
