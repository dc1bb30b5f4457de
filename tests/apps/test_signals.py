"""SIGINT/SIGTERM stop long-running commands through their own clean-up path."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from fleetgate.apps.signals import cancelled_on_signals, stop_on_signals
from tests.waiting import HANG_SECONDS


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
async def test_a_stop_signal_sets_the_event(sig: signal.Signals) -> None:
    stop = asyncio.Event()
    with stop_on_signals(stop):
        os.kill(os.getpid(), sig)
        await asyncio.wait_for(stop.wait(), timeout=HANG_SECONDS)
    assert stop.is_set()


async def test_a_stop_signal_cancels_the_task_so_finally_blocks_run() -> None:
    cleaned = []

    async def job() -> None:
        with cancelled_on_signals():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                await asyncio.sleep(2 * HANG_SECONDS)  # cancelled long before
            finally:
                cleaned.append("released")

    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(job(), timeout=HANG_SECONDS)
    assert cleaned == ["released"]


async def test_the_handlers_are_removed_on_leaving_the_block() -> None:
    loop = asyncio.get_running_loop()
    with stop_on_signals(asyncio.Event()):
        pass
    # No handler left behind: removing one now reports that none was installed.
    assert loop.remove_signal_handler(signal.SIGTERM) is False
