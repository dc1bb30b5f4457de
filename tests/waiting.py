"""Waiting, in async tests, for something another task brings about."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def until(predicate: Callable[[], bool], seconds: float = 30) -> None:
    """Return once ``predicate()`` holds, polling; ``TimeoutError`` after ``seconds``.

    The default is generous because the machine running the suite may be loaded.
    """
    async with asyncio.timeout(seconds):
        while True:
            if predicate():
                return
            await asyncio.sleep(0.01)
