"""What group commit hands a batch executor, and what each admission of the batch came to.

Group commit (``group_commit``) runs the admissions waiting at one moment in one transaction.
An executor runs them inside that open transaction, one after the other, each with its own
guarded statements in the canonical order, and reports one :class:`ItemResult` per item, in
the items' order. Its contract, which every executor keeps and the batch tests check:

- an item that is not ``ADMITTED`` has changed nothing (its own work was undone inside the
  transaction: a savepoint rolled back, or a PL/pgSQL subtransaction), and the items before
  and after it are unaffected;
- an ``ADMITTED`` item's counters and placement row are written; its audit events are *not*:
  they are returned in ``events`` and the group committer inserts every item's events in one
  statement, after the last admission and before the COMMIT;
- it bounds its own lock waits where the database would wait long (``bound_batch_waits``):
  the batch holds earlier items' rows while a later item waits, out of the canonical order;
- an error that leaves the transaction unusable (a lost connection, MariaDB's deadlock, which
  rolls back the whole transaction) is raised: the group committer then splits the batch and
  admits each item alone, on the one-admission path with its own retries (nothing of the
  batch committed, so nothing can be applied twice).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from fleetgate.domain.capacity.claims import ClaimEnforcement
from fleetgate.domain.capacity.denials import Denial
from fleetgate.domain.capacity.model import Admission, AdmitRequest
from fleetgate.domain.events import Event
from fleetgate.domain.ports import Audit


@dataclass(frozen=True)
class BatchItem:
    """One admission waiting for its batch: the request, its placement id, its audit."""

    request: AdmitRequest
    placement_id: str
    audit: Audit | None = None


class Outcome(enum.Enum):
    """What one item of a batch came to inside the batch's transaction."""

    #: Charged and recorded; commits with the batch.
    ADMITTED = "admitted"
    #: A guard refused it (``denial``); after the commit a repeat of an earlier request id is
    #: answered with that placement instead, as on the one-admission path.
    REFUSED = "refused"
    #: Its request id is already taken (the placement row's UNIQUE key): after the commit the
    #: earlier placement is read and returned as a replay.
    DUPLICATE = "duplicate"
    #: Its node does not exist (after the commit: a replay if the request id is known, else
    #: ``NodeNotFound``).
    NO_NODE = "no_node"
    #: Not finished inside the batch (a claim appeared meanwhile, a row that admits under the
    #: lock after all, an advisory claim past its limit, a deadlock or lock wait met by this
    #: item alone, a request the executor does not take): admitted alone after the batch.
    SOLO = "solo"


@dataclass(frozen=True)
class ItemResult:
    """One item's outcome; ``admission`` and ``events`` for ADMITTED, ``denial`` for REFUSED."""

    outcome: Outcome
    admission: Admission | None = None
    denial: Denial | None = None
    events: Sequence[Event] = field(default=())
    #: Why an item went SOLO (for logs and tests).
    reason: str = ""
    #: REFUSED or NO_NODE after the executor itself looked for an earlier placement of the
    #: request id and found none (PostgreSQL's function does, before it answers a refusal):
    #: the group committer then answers with no read of its own.
    repeat_checked: bool = False


class BatchExecutor(Protocol):
    """Runs a batch's items inside the caller's open transaction (see the module's contract)."""

    async def __call__(
        self,
        conn: AsyncConnection,
        items: Sequence[BatchItem],
        now: float,
        enforcement: ClaimEnforcement,
    ) -> list[ItemResult]:
        """One result per item, in order."""
        ...


__all__ = ["BatchExecutor", "BatchItem", "ItemResult", "Outcome"]
