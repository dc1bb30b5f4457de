"""The writer queue: batches form from what waits, a cancelled waiter is skipped, the writer
ends when idle and answers everyone when its loop shuts it down. No database: ``run`` here is
a recording function (the transactions it stands for are tested in group_commit and events)."""

from __future__ import annotations

import asyncio

import pytest

from fleetgate.adapters.sql.writer_queue import Waiting, WriterQueue
from fleetgate.domain.capacity.errors import LedgerUnavailable

NAME = "test-writer"


class Recorder:
    """A ``run`` that answers each item with itself doubled and keeps the batches it saw."""

    def __init__(self, hold: asyncio.Event | None = None) -> None:
        self.batches: list[list[int]] = []
        self.hold = hold

    async def __call__(self, batch: list[Waiting[int, int]]) -> None:
        self.batches.append([w.item for w in batch])
        if self.hold is not None:
            await self.hold.wait()
        for waiting in batch:
            waiting.settle(2 * waiting.item)


def writers() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == NAME]


async def test_what_queues_while_a_batch_runs_is_the_next_batch() -> None:
    hold = asyncio.Event()
    run = Recorder(hold)
    queue: WriterQueue[int, int] = WriterQueue(run, room=3, name=NAME, shut_down="gone")
    first = asyncio.create_task(queue.submit(0))
    await asyncio.sleep(0.01)  # the writer took the lone item and is running it
    rest = [asyncio.create_task(queue.submit(i)) for i in range(1, 6)]
    await asyncio.sleep(0)
    hold.set()
    assert await asyncio.gather(first, *rest) == [0, 2, 4, 6, 8, 10]
    assert run.batches == [[0], [1, 2, 3], [4, 5]]  # in arrival order, ``room`` at most
    assert writers() == []  # ended once nothing was left


async def test_a_cancelled_waiter_is_skipped_and_others_are_answered() -> None:
    run = Recorder()
    queue: WriterQueue[int, int] = WriterQueue(run, room=8, name=NAME, shut_down="gone")
    tasks = [asyncio.create_task(queue.submit(i)) for i in range(4)]
    await asyncio.sleep(0)  # all queued, the writer not yet run
    tasks[1].cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(results[1], asyncio.CancelledError)
    assert [results[i] for i in (0, 2, 3)] == [0, 4, 6] and run.batches == [[0, 2, 3]]


async def test_max_wait_gathers_a_later_arrival_into_the_batch() -> None:
    run = Recorder()
    queue: WriterQueue[int, int] = WriterQueue(
        run, room=2, name=NAME, shut_down="gone", max_wait=60.0
    )
    first = asyncio.create_task(queue.submit(1))
    await asyncio.sleep(0.01)  # the writer waits for more: the batch has room
    assert run.batches == []
    assert await asyncio.gather(first, queue.submit(2)) == [2, 4]  # full: it waits no longer
    assert run.batches == [[1, 2]]


async def test_a_writer_cancelled_with_its_loop_answers_everyone_unavailable() -> None:
    run = Recorder(asyncio.Event())  # never set: the batch hangs
    queue: WriterQueue[int, int] = WriterQueue(run, room=1, name=NAME, shut_down="shut down")
    tasks = [asyncio.create_task(queue.submit(i)) for i in range(3)]
    await asyncio.sleep(0.01)
    (writer,) = writers()
    writer.cancel()
    for task in tasks:
        with pytest.raises(LedgerUnavailable, match="shut down"):
            await task
    assert writers() == []
    await queue.close()  # nothing left to finish
