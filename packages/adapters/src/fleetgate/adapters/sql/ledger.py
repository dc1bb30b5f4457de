"""The SQL capacity ledger: one implementation of the CapacityLedger port for every dialect.

A facade: each operation is implemented by a small module (``admission``, ``release``,
``nodes``, ``reads``, ``events``) over a shared :class:`~fleetgate.adapters.sql.engine.Store`;
what differs between SQLite, MariaDB and PostgreSQL is the ``DialectSupport`` its plugin passes.
The claims and reconcile modules plug in the same way (``self.store`` is all they need).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection

from fleetgate.adapters.sql import (
    admission,
    batch_savepoints,
    events,
    migrate,
    nodes,
    reads,
    release,
    reservations,
    tokens,
)
from fleetgate.adapters.sql import claims as claim_ops
from fleetgate.adapters.sql import reconcile as reconcile_ops
from fleetgate.adapters.sql.batch_items import BatchExecutor, BatchItem, ItemResult
from fleetgate.adapters.sql.dialect import DialectSupport
from fleetgate.adapters.sql.engine import Store
from fleetgate.adapters.sql.group_commit import GroupCommitConfig, GroupCommitStats, GroupCommitter
from fleetgate.domain.capacity.claims import (
    Claim,
    ClaimDeletion,
    ClaimEnforcement,
    ClaimOutcome,
    ClaimRequest,
    ClaimUpdate,
    enforcement_of,
)
from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.capacity.dimensions import Overcommit
from fleetgate.domain.capacity.model import (
    Admission,
    AdmitRequest,
    ClusterState,
    MoveRequest,
    NodeMetrics,
    NodeSpec,
    NodeState,
    Placement,
    RecordedEvent,
    Release,
)
from fleetgate.domain.capacity.reconcile import PassReport
from fleetgate.domain.capacity.reservations import Reservation, ReservationRequest, Reserved
from fleetgate.domain.events import Event
from fleetgate.domain.ports import Audit, AuditOf, Clock, EventSink
from fleetgate.domain.tokens import ApiToken

_log = logging.getLogger("fleetgate.ledger")
R = TypeVar("R")


def overcommit_from(options: dict[str, Any]) -> Overcommit:
    """The overcommit ratios in the ledger options (``options["capacity"]``), else the domain's."""
    capacity = options.get("capacity") or {}
    default = Overcommit()
    return Overcommit(
        cpu=capacity.get("cpu_overcommit", default.cpu),
        memory=capacity.get("memory_overcommit", default.memory),
        disk=capacity.get("disk_overcommit", default.disk),
    )


def enforcement_from(options: dict[str, Any]) -> ClaimEnforcement:
    """How an active claim binds its own namespace (``advisory`` by default), the domain's enum."""
    return enforcement_of((options.get("claims") or {}).get("enforcement", "advisory"))


class SqlLedger:
    """A CapacityLedger over SQLAlchemy async (SQLite, MariaDB or PostgreSQL)."""

    def __init__(
        self,
        url: str,
        options: dict[str, Any],
        dialect: DialectSupport | None = None,
        clock: Clock | None = None,
        demand: DemandPolicy | None = None,
    ) -> None:
        self.url = url
        self.options = options
        self.overcommit = overcommit_from(options)
        # The process's one policy, passed in by the composition root (the domain's defaults
        # when none is): the ledger decays demand with the policy the services charge it by.
        self.demand = demand or DemandPolicy()
        self.enforcement = enforcement_from(options)
        self.store = Store(url, options, dialect or DialectSupport(), clock)
        #: Events written on their own (the sink's, ``record_events``) commit in shared groups.
        self._recorder = events.EventRecorder(self.store)
        self._sink = events.SqlEventSink(self._recorder)
        #: Admit through the PostgreSQL function (decided at start: only if installed, current).
        self.one_call = False
        #: Run batches through the PostgreSQL batch function (the same decision, for it).
        self.batch_call = False
        #: Concurrent admissions share transactions (``options["group_commit"]``; on by default).
        self.group_commit = GroupCommitConfig.from_options(options)
        self._batcher: GroupCommitter | None = None
        if self.group_commit.enabled:
            self._batcher = GroupCommitter(
                self.store,
                self.group_commit,
                self.enforcement,
                self._batch_executor,
                self._sink.committed,
                lambda: self.one_call,
            )

    # lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Create the engine and migrate to head (unless ``options["migrate"]`` is false)."""
        if self.options.get("migrate", True):
            await migrate.upgrade(self.store, "head")
        else:
            await reads.cluster_row(self.store)  # connect now: fail fast on a bad URL
        self.one_call = await self._function_is_current()
        self.batch_call = self.one_call and await self.store.read(
            self.store.dialect.batch_function_current, what="check fleetgate_admit_batch"
        )

    async def _function_is_current(self) -> bool:
        # ``admission_function: false`` keeps PostgreSQL on the in-process path (to compare).
        if not self.store.dialect.admission_function or not self.options.get(
            "admission_function", True
        ):
            return False
        dialect = self.store.dialect
        current = await self.store.read(
            dialect.admission_function_current, what="check fleetgate_admit"
        )
        if not current:
            _log.warning(
                "%s is missing or older than this fleetgate's guards: admitting in-process "
                "(run `fleetgate db upgrade`)",
                dialect.admission_function,
            )
        return current

    async def close(self) -> None:
        """Finish the admissions and events already queued for a group, then dispose of the
        connections."""
        if self._batcher is not None:
            await self._batcher.close()
        await self._recorder.close()
        await self.store.dispose()

    def _batch_executor(self) -> BatchExecutor:
        """What runs a batch's admissions: the one place that chooses, per dialect.

        PostgreSQL's batch function where it and ``fleetgate_admit`` are installed and current
        (one round trip for the whole batch); else each item in a savepoint of its own.
        """
        if self.one_call and self.batch_call:
            return self.store.dialect.admit_batch_by_function  # bounds its waits itself
        return self._admit_each

    async def _admit_each(
        self,
        conn: AsyncConnection,
        items: Sequence[BatchItem],
        now: float,
        enforcement: ClaimEnforcement,
    ) -> list[ItemResult]:
        """The savepoint executor, after the dialect bounded the batch's lock waits."""
        await self.store.dialect.bound_batch_waits(conn)
        return await batch_savepoints.admit_each(conn, items, now, enforcement)

    def group_commit_stats(self) -> GroupCommitStats:
        """What group commit has done so far (zeros when it is off)."""
        return GroupCommitStats() if self._batcher is None else self._batcher.stats()

    async def migrate(self, revision: str = "head") -> str:
        """Migrate to ``revision``; return the current revision."""
        return await migrate.upgrade(self.store, revision)

    async def schema_revision(self) -> str | None:
        """The schema revision the database is at (None before the first migration)."""
        return await migrate.current(self.store)

    def schema_history(self) -> list[tuple[str, str]]:
        """Every schema revision this version ships, oldest first, with its description."""
        return migrate.history()

    def event_sink(self) -> EventSink:
        """An EventSink writing to the events table."""
        return self._sink

    # nodes --------------------------------------------------------------------------------

    def _trail(self, audit: AuditOf[R] | None) -> events.Audited[R]:
        """The audit of one change, written in its transaction (one mechanism for all)."""
        return events.Audited(audit, self._sink.committed)

    async def add_node(
        self, spec: NodeSpec, *, audit: AuditOf[NodeState] | None = None
    ) -> NodeState:
        """Add a node."""
        return await nodes.add(self.store, spec, self.overcommit, self._trail(audit))

    async def update_node(
        self, spec: NodeSpec, *, audit: AuditOf[NodeState] | None = None
    ) -> NodeState:
        """Replace a node's pool, labels and capacity."""
        return await nodes.replace(self.store, spec, self.overcommit, self._trail(audit))

    async def remove_node(self, name: str, *, audit: AuditOf[None] | None = None) -> None:
        """Remove a node that holds no placements."""
        await nodes.remove(self.store, name, self._trail(audit))

    async def publish_metrics(self, name: str, metrics: NodeMetrics) -> NodeState:
        """Record a node's metrics."""
        return await nodes.publish_metrics(self.store, name, metrics)

    async def cordon(self, name: str, *, audit: AuditOf[NodeState] | None = None) -> NodeState:
        """Stop admitting onto a node."""
        return await nodes.set_schedulable(self.store, name, False, self._trail(audit))

    async def uncordon(self, name: str, *, audit: AuditOf[NodeState] | None = None) -> NodeState:
        """Admit onto a node again."""
        return await nodes.set_schedulable(self.store, name, True, self._trail(audit))

    # placements ---------------------------------------------------------------------------

    async def admit(self, request: AdmitRequest, *, audit: Audit | None = None) -> Admission:
        """Admit a placement or refuse it; ``audit``'s events commit with the admission.

        With group commit on, the admission joins the next batch (a lone one runs alone).
        """
        if self._batcher is not None:
            return await self._batcher.admit(request, audit)
        return await admission.admit(
            self.store,
            request,
            self.enforcement,
            audit,
            self._sink.committed,
            one_call=self.one_call,
        )

    async def release(
        self,
        placement_id: str,
        *,
        namespace: str | None = None,
        audit: AuditOf[Release] | None = None,
    ) -> Release:
        """Release a placement (idempotent)."""
        decay = self.demand.decay_seconds
        return await release.release(self.store, placement_id, namespace, decay, self._trail(audit))

    async def move(self, request: MoveRequest, *, audit: Audit | None = None) -> Admission:
        """Move a placement to another node."""
        decay = self.demand.decay_seconds
        return await release.move(self.store, request, decay, self._trail(audit))

    # room reservations --------------------------------------------------------------------

    async def reserve(
        self,
        owner: str,
        requests: Sequence[ReservationRequest],
        *,
        audit: AuditOf[Reserved] | None = None,
    ) -> Reserved:
        """Replace ``owner``'s reservations with ``requests``, all or none."""
        return await reservations.reserve(self.store, owner, requests, self._trail(audit))

    async def reservations(self, owner: str | None = None) -> list[Reservation]:
        """The stored reservations (of ``owner``, or all)."""
        return await reservations.listed(self.store, owner)

    async def end_reservations(self, owner: str) -> int:
        """End ``owner``'s reservations, crediting their nodes."""
        return await reservations.end(self.store, owner)

    # reads --------------------------------------------------------------------------------

    async def nodes(self, *, after: str | None = None, limit: int | None = None) -> list[NodeState]:
        """Every node, or one page of them by name."""
        return await reads.all_nodes(self.store, after=after, limit=limit)

    async def node(self, name: str) -> NodeState | None:
        """One node."""
        return await reads.one_node(self.store, name)

    async def placements(
        self,
        namespace: str | None = None,
        *,
        node: str | None = None,
        after: str | None = None,
        limit: int | None = None,
    ) -> list[Placement]:
        """Placements by namespace and/or node, or one page of them by id."""
        return await reads.placements_where(self.store, namespace, node, after=after, limit=limit)

    async def placement(self, placement_id: str) -> Placement | None:
        """One placement."""
        return await reads.one_placement(self.store, placement_id)

    async def placement_by_request(self, namespace: str, request_id: str) -> Placement | None:
        """The placement for an idempotency key."""
        return await reads.placement_by_request(self.store, namespace, request_id)

    async def cluster(self) -> ClusterState:
        """The cluster row."""
        return await reads.cluster_row(self.store)

    async def events(
        self,
        *,
        namespace: str | None = None,
        subject: str | None = None,
        kind: str | None = None,
        after_id: int = 0,
        limit: int = 100,
        newest_first: bool = False,
        before_id: int | None = None,
    ) -> list[RecordedEvent]:
        """Audit events."""
        return await events.read(
            self.store,
            namespace=namespace,
            subject=subject,
            kind=kind,
            after_id=after_id,
            limit=limit,
            newest_first=newest_first,
            before_id=before_id,
        )

    async def record_events(self, events: Sequence[Event]) -> None:
        """Append events."""
        await self._recorder.record(events)

    # claims and the reconciler ---------------------------------------------------------------

    async def create_claim(
        self, request: ClaimRequest, *, audit: AuditOf[ClaimOutcome] | None = None
    ) -> ClaimOutcome:
        """Create a namespace claim (migrating its usage) or refuse it."""
        return await claim_ops.create(self.store, request, self._trail(audit))

    async def claim(self, claim_id: str, *, namespace: str | None = None) -> Claim | None:
        """One claim, as readers see it now."""
        return await claim_ops.get(self.store, claim_id, namespace)

    async def claims(self, namespace: str | None = None) -> list[Claim]:
        """Claims, expired ones included."""
        return await claim_ops.list_claims(self.store, namespace)

    async def update_claim(
        self,
        claim_id: str,
        update: ClaimUpdate,
        *,
        namespace: str | None = None,
        audit: AuditOf[ClaimOutcome] | None = None,
    ) -> ClaimOutcome:
        """Grow, shrink or re-date a claim, or refuse."""
        trail = self._trail(audit)
        return await claim_ops.update(self.store, claim_id, update, namespace, trail)

    async def delete_claim(
        self,
        claim_id: str,
        *,
        namespace: str | None = None,
        audit: AuditOf[ClaimDeletion] | None = None,
    ) -> ClaimDeletion:
        """Delete a claim (idempotent)."""
        return await claim_ops.delete(self.store, claim_id, namespace, self._trail(audit))

    async def reconcile(self, *, audit: AuditOf[PassReport] | None = None) -> PassReport:
        """One reconcile pass."""
        decay = self.demand.decay_seconds
        return await reconcile_ops.run_pass(self.store, decay, self._trail(audit))

    # API tokens (the TokenStore port) -------------------------------------------------------

    async def create_token(
        self,
        namespace: str,
        token_digest: str,
        at: datetime,
        *,
        audit: AuditOf[ApiToken] | None = None,
    ) -> ApiToken:
        """Store a namespace token's digest."""
        return await tokens.create(self.store, namespace, token_digest, at, self._trail(audit))

    async def token_by_digest(self, token_digest: str) -> ApiToken | None:
        """The namespace token with this digest."""
        return await tokens.by_digest(self.store, token_digest)

    async def list_tokens(self, namespace: str) -> list[ApiToken]:
        """A namespace's tokens, oldest first."""
        return await tokens.of_namespace(self.store, namespace)

    async def revoke_token(
        self, namespace: str, token_id: str, at: datetime, *, audit: AuditOf[bool] | None = None
    ) -> bool:
        """Revoke a namespace's active token."""
        return await tokens.revoke(self.store, namespace, token_id, at, self._trail(audit))
