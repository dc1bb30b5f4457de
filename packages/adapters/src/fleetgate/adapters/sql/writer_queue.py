"""One writer task for the requests queued at one moment: the queue every group commit runs on.

Callers ``submit`` an item and await its answer. The first to find no writer starts one, in its
own event loop; the writer takes what is queued (up to ``room``), waits up to ``max_wait``
seconds for more while the batch has room (0: a lone request waits for nothing), hands the batch
to ``run``, which answers each item, and ends once nothing is queued: the next item starts a new
one, so no task outlives its work or its loop. Admissions (``group_commit``) and events recorded
on their own (``events``) share transactions through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from fleetgate.domain.capacity.errors import LedgerUnavailable

I = TypeVar("I")  # noqa: E741 - the item, beside A the answer
A = TypeVar("A")
_log = logging.getLogger("fleetgate.ledger.group_commit")


@dataclass
class Waiting(Generic[I, A]):
    """One queued item and the answer its caller awaits."""

    item: I
    answer: asyncio.Future[A]

    def settle(self, result: A) -> None:
        """Answer with ``result``, unless the caller stopped waiting."""
        if not self.answer.done():
            self.answer.set_result(result)

    def fail(self, error: Exception) -> None:
        """Answer with ``error``, unless the caller stopped waiting."""
        if not self.answer.done():
            self.answer.set_exception(error)


class WriterQueue(Generic[I, A]):
    """The queue of waiting items and the one writer task that hands them to ``run`` in batches.

    ``run(batch)`` must answer every item of its batch; an item whose caller stopped waiting
    before the writer took it is skipped (cancelling a caller cancels only its waiting).
    """

    def __init__(
        self,
        run: Callable[[list[Waiting[I, A]]], Awaitable[None]],
        *,
        room: int,
        name: str,
        shut_down: str,
        max_wait: float = 0.0,
    ) -> None:
        self._run = run
        self._room = room
        self._name = name
        self._shut_down = shut_down
        self._max_wait = max_wait
        self._pending: deque[Waiting[I, A]] = deque()
        self._arrived = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None

    async def submit(self, item: I) -> A:
        """Queue ``item`` for the next batch and return the answer ``run`` gives it."""
        answer: asyncio.Future[A] = asyncio.get_running_loop().create_future()
        self._pending.append(Waiting(item, answer))
        if self._writer is None:
            # A new writer (and its wake-up event) in the caller's loop: the last one ended
            # when nothing was left, so no task outlives its work or its event loop.
            # Its own empty context: the writer serves many callers, so it must not carry
            # the first caller's context variables (request ids in logs) into the others'.
            self._arrived = asyncio.Event()
            self._writer = asyncio.create_task(
                self._write(), name=self._name, context=contextvars.Context()
            )
        self._arrived.set()
        return await answer

    def _take(self, room: int) -> list[Waiting[I, A]]:
        taken: list[Waiting[I, A]] = []
        while self._pending and len(taken) < room:
            waiting = self._pending.popleft()
            if not waiting.answer.cancelled():  # its caller stopped waiting before it ran
                taken.append(waiting)
        return taken

    async def _write(self) -> None:
        """Batch and run what is waiting until nothing is; then end (a new one starts later)."""
        batch: list[Waiting[I, A]] = []
        try:
            while True:
                self._arrived.clear()
                batch = self._take(self._room)
                if not batch:
                    if not self._pending:
                        break
                    continue
                await self._fill(batch)
                await self._run(batch)
                batch = []
        except asyncio.CancelledError:  # the loop is shutting down: nobody is left hanging
            self._fail_all(batch, LedgerUnavailable(self._shut_down))
            raise
        except Exception as exc:  # pragma: no cover - a bug: answer everyone with it, and say so
            _log.exception("the %s writer failed", self._name)
            self._fail_all(batch, exc)
        finally:
            self._writer = None

    def _fail_all(self, batch: list[Waiting[I, A]], error: Exception) -> None:
        for waiting in [*batch, *self._pending]:
            waiting.fail(error)
        self._pending.clear()

    async def _fill(self, batch: list[Waiting[I, A]]) -> None:
        """Wait up to ``max_wait`` for more items, while the batch has room."""
        if self._max_wait <= 0:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._max_wait
        while len(batch) < self._room:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), remaining)
            batch += self._take(self._room - len(batch))

    async def close(self) -> None:
        """Let the writer finish what is queued (each caller gets its answer), then return."""
        writer = self._writer
        if writer is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(writer)


__all__ = ["Waiting", "WriterQueue"]
