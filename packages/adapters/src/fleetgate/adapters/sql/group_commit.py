"""Group commit: the admissions waiting at one moment, admitted in one transaction.

One writer task per ledger (``writer_queue``) takes every admission queued when it wakes (up to
``max_batch``), waits at most ``max_wait_ms`` for more (0 by default: a lone request waits for
nothing), and:

- a batch of one runs the one-admission path (``admission.admit``) unchanged;
- a batch of two or more runs in one ``Store.write`` transaction: first the rows its items will
  charge are locked in the canonical order (:func:`lock_in_order`), then the executor (each
  item with its own guarded statements, see ``batch_items``), then every admitted item's audit
  events in one INSERT, then one COMMIT. The batch is run once, never retried whole: whatever
  makes it fail (a lost connection before the COMMIT, MariaDB's deadlock, a serialization
  failure, busy) splits it, and each item is admitted alone with its own retries. Nothing of
  the batch committed, so nothing is applied twice; and a batch that met a conflict once,
  holding every item's rows, is the likeliest transaction to meet it again (docs/decisions.md).
- a connection lost during the batch's COMMIT leaves every item's outcome unknown: each caller
  gets ``LedgerUnavailable`` naming the commit, as the one-admission path answers.

After the COMMIT each caller gets what the one-admission path would have answered (a replay,
a denial, ``NodeNotFound``); items the batch could not finish (SOLO) and the items of a split
batch are admitted alone by their own callers, so they never hold up the next batch. A caller
that stops waiting changes nothing: its item commits with its batch or not at all.
"""

from __future__ import annotations

import contextvars
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from fleetgate.adapters.sql import admission
from fleetgate.adapters.sql.batch_items import BatchExecutor, BatchItem, ItemResult, Outcome
from fleetgate.adapters.sql.engine import CommitUnknown, Store
from fleetgate.adapters.sql.events import insert_events
from fleetgate.adapters.sql.schema import CLUSTER_ID, claims, cluster, nodes
from fleetgate.adapters.sql.writer_queue import Waiting, WriterQueue
from fleetgate.domain.capacity.claims import ClaimEnforcement
from fleetgate.domain.capacity.errors import LedgerUnavailable, NodeNotFound
from fleetgate.domain.capacity.model import Admission, AdmitRequest
from fleetgate.domain.events import Event
from fleetgate.domain.ports import Audit

_log = logging.getLogger("fleetgate.ledger.group_commit")

#: Admissions per batch unless configured: enough to amortise a COMMIT many times over, few
#: enough that one batch's locks are held for a few milliseconds.
DEFAULT_MAX_BATCH = 32
#: The writer task's name (it exists only while admissions are queued or in flight).
WRITER_TASK = "fleetgate-group-commit"


@dataclass(frozen=True)
class GroupCommitConfig:
    """How big a batch may grow and how long the writer may wait to fill it."""

    max_batch: int = DEFAULT_MAX_BATCH
    max_wait_ms: float = 0.0

    @property
    def enabled(self) -> bool:
        """A batch of at most one is the one-admission path: group commit is off."""
        return self.max_batch > 1

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> GroupCommitConfig:
        """From ``options["group_commit"]`` (``{"max_batch": N, "max_wait_ms": W}``), checked."""
        raw = options.get("group_commit")
        if raw is None:
            return cls()
        if not isinstance(raw, dict):
            raise ValueError(f"group_commit: must be a mapping, got {raw!r}")
        unknown = set(raw) - {"max_batch", "max_wait_ms"}
        if unknown:
            raise ValueError(f"group_commit: unknown option(s) {', '.join(sorted(unknown))}")
        max_batch = raw.get("max_batch", DEFAULT_MAX_BATCH)
        if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
            raise ValueError(
                f"group_commit.max_batch: must be an integer >= 1 (1 turns group commit off), "
                f"got {max_batch!r}"
            )
        wait = raw.get("max_wait_ms", 0.0)
        if isinstance(wait, bool) or not isinstance(wait, int | float) or not wait >= 0:
            raise ValueError(f"group_commit.max_wait_ms: must be a number >= 0, got {wait!r}")
        return cls(max_batch=max_batch, max_wait_ms=float(wait))


@dataclass(frozen=True)
class GroupCommitStats:
    """What group commit did so far (all zeros when it is off)."""

    #: Batches of two or more admissions run in one transaction (split ones included).
    batches: int = 0
    #: Admissions those batches carried.
    batched_admissions: int = 0
    #: The most admissions one batch carried.
    largest_batch: int = 0
    #: Admissions run on the one-admission path: batches of one, SOLO items, split batches.
    solo_admissions: int = 0
    #: Batches that failed whole and were split into admissions of their own.
    split_batches: int = 0

    def since(self, before: GroupCommitStats) -> GroupCommitStats:
        """The counts between ``before`` and these (the largest batch stays the running one)."""
        return GroupCommitStats(
            self.batches - before.batches,
            self.batched_admissions - before.batched_admissions,
            self.largest_batch,
            self.solo_admissions - before.solo_admissions,
            self.split_batches - before.split_batches,
        )

    @property
    def mean_batch(self) -> float:
        """Admissions per batch (0.0 when nothing was batched)."""
        return self.batched_admissions / self.batches if self.batches else 0.0


class _Alone:
    """The answer that tells a caller to admit its request on the one-admission path."""


_ALONE = _Alone()
_SHUT_DOWN = "admit: the ledger shut down while this admission waited for its batch"


_Answer = ItemResult | _Alone | Admission
_Waiting = Waiting[BatchItem, _Answer]


class GroupCommitter:
    """The queue of waiting admissions and the one writer task that batches them."""

    def __init__(
        self,
        store: Store,
        config: GroupCommitConfig,
        enforcement: ClaimEnforcement,
        executor: Callable[[], BatchExecutor],
        committed: Callable[[Sequence[Event]], None],
        one_call: Callable[[], bool],
    ) -> None:
        self.store = store
        self.config = config
        self.enforcement = enforcement
        self._executor = executor
        self._committed = committed
        self._one_call = one_call
        self._queue: WriterQueue[BatchItem, _Answer] = WriterQueue(
            self._run,
            room=config.max_batch,
            name=WRITER_TASK,
            shut_down=_SHUT_DOWN,
            max_wait=config.max_wait_ms / 1000.0,
        )
        self._stats = GroupCommitStats()

    def stats(self) -> GroupCommitStats:
        """The counters so far."""
        return self._stats

    def _count(self, **more: int) -> None:
        s = self._stats
        self._stats = replace(s, **{name: getattr(s, name) + n for name, n in more.items()})

    async def admit(self, request: AdmitRequest, audit: Audit | None) -> Admission:
        """Queue ``request`` for the next batch and answer as the one-admission path would."""
        item = BatchItem(request, request.placement_id or str(uuid.uuid4()), _in_context(audit))
        # Cancelling this await cancels only the waiting: the writer skips a cancelled item it
        # has not taken yet, and one it has taken commits with its batch or not at all.
        result = await self._queue.submit(item)
        if isinstance(result, Admission):
            return result
        if isinstance(result, _Alone):
            return await self._alone(request, audit)
        return await self._answer(item, result)

    async def _alone(self, request: AdmitRequest, audit: Audit | None) -> Admission:
        self._count(solo_admissions=1)
        return await admission.admit(
            self.store, request, self.enforcement, audit, self._committed, one_call=self._one_call()
        )

    async def _answer(self, item: BatchItem, result: ItemResult) -> Admission:
        """The caller's answer from its item's committed outcome (the one-admission meanings)."""
        request = item.request
        if result.outcome is Outcome.ADMITTED:
            assert result.admission is not None
            return result.admission
        if result.outcome is Outcome.SOLO:
            return await self._alone(request, item.audit)
        if not result.repeat_checked:  # else: no earlier placement when it was refused
            replay = await admission.replay_of(self.store, request)
            if replay is not None:
                return replay
        if result.outcome is Outcome.REFUSED:
            return Admission(denial=result.denial)
        if result.outcome is Outcome.NO_NODE:
            raise NodeNotFound(request.node)
        # DUPLICATE whose earlier placement has gone since (released): its request id is free
        # again, so the request is admitted afresh, alone.
        return await self._alone(request, item.audit)

    # the writer ---------------------------------------------------------------------------

    async def _run(self, batch: list[_Waiting]) -> None:
        if len(batch) == 1:
            await self._run_one(batch[0])
            return
        self._count(batches=1, batched_admissions=len(batch))
        if len(batch) > self._stats.largest_batch:
            self._stats = replace(self._stats, largest_batch=len(batch))
        items = [waiting.item for waiting in batch]
        try:
            results = await self.store.write(
                self._batch_work(items), what=f"admit a batch of {len(items)}", retry=False
            )
        except CommitUnknown as exc:
            for waiting in batch:
                waiting.fail(exc)
            return
        except Exception as exc:
            # Nothing of the batch committed: each item is admitted alone, by its own caller.
            # A database's refusal to go on is expected now and then; anything else is a bug
            # the split would hide, so it is logged loudly.
            expected = isinstance(exc, DBAPIError | LedgerUnavailable)
            _log.log(
                logging.INFO if expected else logging.WARNING,
                "splitting a batch of %d after %s",
                len(batch),
                exc,
                exc_info=not expected,
            )
            self._count(split_batches=1)
            for waiting in batch:
                waiting.settle(_ALONE)
            return
        admitted = [e for r in results if r.outcome is Outcome.ADMITTED for e in r.events]
        if admitted:
            self._committed(tuple(admitted))
        for waiting, result in zip(batch, results, strict=True):
            waiting.settle(result)

    async def _run_one(self, waiting: _Waiting) -> None:
        """A batch of one: the one-admission path itself, in the writer (the next batch waits)."""
        self._count(solo_admissions=1)
        item = waiting.item
        try:
            made = await admission.admit(
                self.store,
                item.request,
                self.enforcement,
                item.audit,
                self._committed,
                one_call=self._one_call(),
            )
        except Exception as exc:
            waiting.fail(exc)
            return
        waiting.settle(made)

    def _batch_work(self, items: list[BatchItem]) -> Callable[[AsyncConnection], Any]:
        executor = self._executor()

        async def work(conn: AsyncConnection) -> list[ItemResult]:
            now = self.store.now_epoch()
            if not self.store.dialect.serialize_writers:  # SQLite has one writer, no row locks
                await lock_in_order(conn, items)
            results = await executor(conn, items, now, self.enforcement)
            if len(results) != len(items):  # pragma: no cover - an executor's contract
                raise RuntimeError(f"batch executor gave {len(results)} results for {len(items)}")
            events = [e for r in results if r.outcome is Outcome.ADMITTED for e in r.events]
            await insert_events(conn, events)
            return results

        return work

    async def close(self) -> None:
        """Let the writer finish what is queued (each caller gets its answer), then return."""
        await self._queue.close()


async def lock_in_order(conn: AsyncConnection, items: Sequence[BatchItem]) -> None:
    """Lock the rows the batch's items will charge, in the canonical order, before any item.

    Each item takes its rows in the canonical order (claim, cluster, node, then its placement),
    but one after the other they would not: the second item's claim or cluster row would be
    taken while the first item's node row is held, and a release holding that claim while it
    waits for the node closes a cycle. On MariaDB the release, the smaller transaction, was
    the deadlock victim: most of issue 45's retries. So the batch first takes its namespaces'
    claims (through ``active_namespace``, as an admission does, namespaces in order), the
    cluster row, then its nodes by name; the items then touch rows it holds, plus the placement
    rows they insert (the last class) and the NOWAIT claim check, which never waits.

    The claims and the cluster row are waited for: the batch holds nothing yet, or only rows
    of a lower class. The nodes are taken ``SKIP LOCKED``: a node another transaction holds
    (a long move, a test's outside session) must not hold up the whole batch. Its item waits
    for it in its own turn, as before, bounded (``bound_batch_waits``) or, on InnoDB, with the
    cycle found at once; then it runs alone. ``ORDER BY … FOR UPDATE`` locks in that order on
    both servers (PostgreSQL locks the rows as the sort returns them).
    """
    namespaces = sorted({item.request.namespace for item in items})
    names = sorted({item.request.node for item in items})
    await conn.execute(
        sa.select(claims.c.id)
        .where(claims.c.active_namespace.in_(namespaces))
        .order_by(claims.c.active_namespace)
        .with_for_update()
    )
    await conn.execute(
        sa.update(cluster).where(cluster.c.id == CLUSTER_ID).values(updated_at=cluster.c.updated_at)
    )
    await conn.execute(
        sa.select(nodes.c.name)
        .where(nodes.c.name.in_(names))
        .order_by(nodes.c.name)
        .with_for_update(skip_locked=True)
    )


def _in_context(audit: Audit | None) -> Audit | None:
    """``audit`` bound to the caller's context: the writer builds the events, but they are the
    caller's (the request id an audit event carries is a context variable of the request)."""
    if audit is None:
        return None
    context = contextvars.copy_context()
    bound: Audit = audit
    return lambda admission: context.run(bound, admission)


__all__ = [
    "DEFAULT_MAX_BATCH",
    "WRITER_TASK",
    "GroupCommitConfig",
    "GroupCommitStats",
    "GroupCommitter",
    "lock_in_order",
]
