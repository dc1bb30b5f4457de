"""Waiting, in async tests, for something another task brings about."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

#: How long a test waits for something before it calls it hung: far beyond what any loaded machine
#: needs, so only a real hang reaches it. A test's outcome must never hang on a shorter wait.
HANG_SECONDS = 120.0


async def until(predicate: Callable[[], bool], seconds: float = HANG_SECONDS) -> None:
    """Return once ``predicate()`` holds, polling; ``TimeoutError`` after ``seconds``.

    The default is generous because the machine running the suite may be loaded.
    """
    async with asyncio.timeout(seconds):
        while True:
            if predicate():
                return
            await asyncio.sleep(0.01)
