"""Protocols the outside world must satisfy. Adapters implement them; services depend on them.

Each area owns one section below. A port says *what* must happen, never how: the SQL ledger, the
fake cluster and the Karpenter gateway are interchangeable behind these.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar, runtime_checkable

from fleetgate.domain.capacity.charging import Charged, ClaimCounters
from fleetgate.domain.capacity.claims import (
    Claim,
    ClaimCharge,
    ClaimDeletion,
    ClaimOutcome,
    ClaimRequest,
    ClaimUpdate,
)
from fleetgate.domain.capacity.dimensions import Resources
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
from fleetgate.domain.rotation.budgets import Budget
from fleetgate.domain.rotation.cluster import PlaceholderSpec, PoolObservation
from fleetgate.domain.rotation.status import PolicyStatus
from fleetgate.domain.tokens import ApiToken

# --- time and events -------------------------------------------------------------------------


@runtime_checkable
class Clock(Protocol):
    """The source of "now". Real time in production, virtual time in the simulator and tests."""

    def now(self) -> datetime:
        """Return the current instant as a timezone-aware UTC datetime."""
        ...


@runtime_checkable
class EventSink(Protocol):
    """Where events go: the audit table, logs, Kubernetes Events. Must never raise on delivery."""

    async def emit(self, events: Sequence[Event]) -> None:
        """Record the events, in order. Best-effort: a failed delivery is logged, not raised."""
        ...


# --- capacity ledger (issue: capacity admission) ---------------------------------------------

_Result = TypeVar("_Result")

#: The audit events that report a change, given the change's result: the ledger writes them in
#: the change's own transaction, after its statements, so they commit with it or not at all
#: (a failed insert fails the change). An empty sequence (a refusal, a no-op) writes none.
#: The ledger's ``event_sink()`` then skips those very event objects when they are emitted to
#: it, so a sink that fans out to it records each event once.
AuditOf = Callable[[_Result], Sequence[Event]]

#: An admission's audit (``CapacityLedger.admit``).
Audit = AuditOf[Admission]


# The ledger is one object (one database, one set of transactions) but no caller needs all of it:
# each role below is what one kind of caller uses, and a caller is annotated with the narrowest
# role it calls (one needing two declares a Protocol deriving from both). ``CapacityLedger`` is
# their composition: what an adapter implements and the composition root builds. The contract
# every role shares: every writing operation is one transaction that commits whole or not at
# all, and starts with its guarded (or floored) UPDATE. A refusal for capacity is a result
# (``Admission.denial``), never an exception. Errors: ``NodeNotFound``, ``NodeExists``,
# ``NodeBusy``, ``PlacementNotFound``, ``LedgerUnavailable`` (database unreachable or retries of
# deadlock / serialization / busy errors exhausted: nothing changed), ``ValueError`` for bad
# input, naming the field. Times are taken from the ledger's clock. Every writing operation that
# reports a change takes an ``audit`` (``AuditOf`` its result): its events commit in the
# change's own transaction.


@runtime_checkable
class LedgerLifecycle(Protocol):
    """Opening and closing the ledger, and its schema: the commands that run it."""

    async def start(self) -> None:
        """Connect, and migrate the schema to head unless the options say ``migrate: false``."""
        ...

    async def close(self) -> None:
        """Release every connection. Idempotent."""
        ...

    async def migrate(self, revision: str = "head") -> str:
        """Bring the schema to ``revision`` (Alembic) and return the revision now current."""
        ...


@runtime_checkable
class InventoryReader(Protocol):
    """The nodes and the cluster row as they are now: what ranking, dashboards and health read."""

    async def nodes(self, *, after: str | None = None, limit: int | None = None) -> list[NodeState]:
        """Every node, by name.

        With ``after`` or ``limit`` it is one keyset page: the names greater than ``after``, at
        most ``limit`` of them. ``None`` leaves that bound off.
        """
        ...

    async def node(self, name: str) -> NodeState | None:
        """One node, or None."""
        ...

    async def cluster(self) -> ClusterState:
        """The cluster row: totals, claimed limits, unclaimed usage (incl. advisory overage)."""
        ...


@runtime_checkable
class NodeInventory(InventoryReader, Protocol):
    """The nodes the ledger admits onto, changed by an operator or the cluster sync.

    Every node write keeps the cluster row's totals equal to the sum of the node limits.
    """

    async def add_node(
        self, spec: NodeSpec, *, audit: AuditOf[NodeState] | None = None
    ) -> NodeState:
        """Add a node; its limits are its capacity × the overcommit ratios. Raises NodeExists."""
        ...

    async def update_node(
        self, spec: NodeSpec, *, audit: AuditOf[NodeState] | None = None
    ) -> NodeState:
        """Replace a node's pool, labels and capacity (limits re-derived; counters kept)."""
        ...

    async def remove_node(self, name: str, *, audit: AuditOf[None] | None = None) -> None:
        """Remove a node; raises NodeBusy while it holds placements, NodeNotFound if absent."""
        ...

    async def publish_metrics(self, name: str, metrics: NodeMetrics) -> NodeState:
        """Record the node's ``cpu_load_1`` and ``cpu_schedulable`` (either may be unknown)."""
        ...

    async def cordon(self, name: str, *, audit: AuditOf[NodeState] | None = None) -> NodeState:
        """Mark the node unschedulable: from now on it admits nothing (placements stay)."""
        ...

    async def uncordon(self, name: str, *, audit: AuditOf[NodeState] | None = None) -> NodeState:
        """Mark the node schedulable again."""
        ...


@runtime_checkable
class PlacementReader(Protocol):
    """The placements as they are now."""

    async def placements(
        self,
        namespace: str | None = None,
        *,
        node: str | None = None,
        after: str | None = None,
        limit: int | None = None,
    ) -> list[Placement]:
        """Placements, filtered by namespace and/or node, oldest first.

        With ``after`` or ``limit`` it is one keyset page instead, ordered by id: the ids
        greater than ``after``, at most ``limit`` of them. ``None`` leaves that bound off.
        """
        ...

    async def placement(self, placement_id: str) -> Placement | None:
        """One placement, or None."""
        ...

    async def placement_by_request(self, namespace: str, request_id: str) -> Placement | None:
        """The placement admitted for ``(namespace, request_id)``, or None."""
        ...


@runtime_checkable
class Admissions(PlacementReader, InventoryReader, Protocol):
    """Placing, releasing and moving under the guards: what the placement use cases call.

    It reads the nodes it ranks and the placements it replays through the same object.
    """

    async def admit(self, request: AdmitRequest, *, audit: Audit | None = None) -> Admission:
        """Charge the namespace side then the node, and record the placement; or refuse.

        Idempotent by ``(namespace, request_id)``: a repeat returns the first placement with
        ``replayed`` set and charges nothing. Raises NodeNotFound for an unknown node.
        ``audit``'s events are written to the audit trail in the admission's transaction, after
        its guarded UPDATEs: they commit with it (a failed write fails it); a refused or replayed
        request writes none. The ledger's ``event_sink()`` then skips those very event objects
        when they are emitted to it, so a sink that fans out to it records each event once.
        """
        ...

    async def release(
        self,
        placement_id: str,
        *,
        namespace: str | None = None,
        audit: AuditOf[Release] | None = None,
    ) -> Release:
        """Delete the placement and credit its charges (floored); idempotent (``released`` false).

        With ``namespace``, a placement of another namespace is treated as absent.
        """
        ...

    async def move(self, request: MoveRequest, *, audit: Audit | None = None) -> Admission:
        """Move a placement to another node under the node guard; raises PlacementNotFound.

        A reservation held for the placement ends with the move, in its transaction: a move onto
        the reserved node charges it nothing more (the reservation's charge becomes the
        placement's, the demand charge added), a move elsewhere credits the reserved node.
        """
        ...


@runtime_checkable
class AdmissionSteps(Protocol):
    """The guarded primitives one admission is made of, carried out inside one write.

    The admission's sequence (``capacity.admission``) calls them in the canonical order and
    decides everything from what they report; a store only carries them out (the SQL ledger in
    its transaction, with its guarded UPDATEs; the in-memory fake on its dicts). A refusal is a
    ``Charged.denial``: the sequence stops, and the store undoes the write whole. ``now`` is the
    write's one instant.
    """

    @property
    def now(self) -> datetime:
        """The instant of the write (the placement's ``admitted_at``)."""
        ...

    async def charge_claim(
        self, request: AdmitRequest, rule: ClaimCharge
    ) -> Charged[ClaimCounters] | None:
        """Charge the namespace's active, unexpired claim by ``rule``; None when it has none.

        Made, ``row`` holds the claim's counters after the charge (always).
        """
        ...

    async def charge_cluster(self, amount: Resources, enforce: bool) -> Charged[None]:
        """Charge ``amount`` to the cluster's unclaimed sums under the cluster guard."""
        ...

    async def claim_appeared(self, namespace: str) -> bool:
        """Whether a claim for ``namespace`` committed since its claim was looked for.

        Asked after the cluster row is held; a store whose writes are atomic answers False.
        """
        ...

    async def charge_node(self, request: AdmitRequest) -> Charged[NodeState]:
        """Charge the request's node under the node guard, adding its demand charge.

        Raises NodeNotFound when there is no such node.
        """
        ...

    async def insert_placement(self, placement: Placement) -> None:
        """Record the placement under its ``(namespace, request_id)`` key.

        A request id already taken stops the write the store's own way (SQL: the UNIQUE key's
        IntegrityError); the caller then answers with the earlier placement.
        """
        ...

    async def charged_node(self, name: str) -> NodeState:
        """The node as charged by ``charge_node`` (its row then, or read under its lock)."""
        ...

    async def record_events(self, events: Sequence[Event]) -> None:
        """Write the admission's audit events in the write, after everything else."""
        ...


#: How a repeated request id is found: the placement under ``(namespace, request_id)``.
PlacementByRequest = Callable[[str, str], Coroutine[Any, Any, Placement | None]]


@runtime_checkable
class ClaimReader(Protocol):
    """Namespace claims as readers see them now (``state`` the effective coverage)."""

    async def claim(self, claim_id: str, *, namespace: str | None = None) -> Claim | None:
        """One claim, its ``state`` the effective coverage now; None if absent or in another
        namespace (when ``namespace`` is given)."""
        ...

    async def claims(self, namespace: str | None = None) -> list[Claim]:
        """Claims, expired ones included, oldest first; ``state`` is the effective coverage."""
        ...


@runtime_checkable
class ClaimBook(ClaimReader, Protocol):
    """Namespace capacity claims: create, update and delete, each one transaction."""

    async def create_claim(
        self, request: ClaimRequest, *, audit: AuditOf[ClaimOutcome] | None = None
    ) -> ClaimOutcome:
        """Reserve ``request.limit`` for the namespace, migrating its current usage into the claim.

        Refusals (``outcome.refusal``): ``exists`` (an active claim already; of two racing
        creates the database lets exactly one through), ``capacity`` (the cluster cannot promise
        it; per-dimension detail), ``no_cluster_capacity`` (no cluster row), ``conflict``.
        """
        ...

    async def update_claim(
        self,
        claim_id: str,
        update: ClaimUpdate,
        *,
        namespace: str | None = None,
        audit: AuditOf[ClaimOutcome] | None = None,
    ) -> ClaimOutcome:
        """Apply a field-masked update: grow (an admission), shrink (down to usage), re-date.

        Refusals: ``not_found``, ``not_active`` (expired, swept or not), ``below_usage``,
        ``capacity``, ``no_cluster_capacity``, ``conflict``.
        """
        ...

    async def delete_claim(
        self,
        claim_id: str,
        *,
        namespace: str | None = None,
        audit: AuditOf[ClaimDeletion] | None = None,
    ) -> ClaimDeletion:
        """Delete a claim; its usage goes back to the unclaimed side. Idempotent (``deleted``
        false when absent)."""
        ...


@runtime_checkable
class LedgerReconciler(Protocol):
    """The reconcile pass: counters recomputed from the placements, due claims expired."""

    async def reconcile(self, *, audit: AuditOf[PassReport] | None = None) -> PassReport:
        """One reconcile pass: expire due claims, recompute every counter from the placements,
        decay expected demand, and report the drift it corrected. One transaction; an admission
        committing meanwhile is never erased."""
        ...


@runtime_checkable
class AuditTrail(Protocol):
    """The append-only audit table: read back by the API, written by the event sink."""

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
        """Audit events with ``after_id`` < id (< ``before_id``), oldest first unless
        ``newest_first``, at most ``limit`` (<= 1000)."""
        ...

    async def record_events(self, events: Sequence[Event]) -> None:
        """Append events to the audit trail (raises on failure; the event sink does not)."""
        ...

    def event_sink(self) -> EventSink:
        """An EventSink writing to this ledger's append-only events table."""
        ...


@runtime_checkable
class RoomReservations(Protocol):
    """Room held on destination nodes for a drain's planned moves (``capacity.reservations``)."""

    async def reserve(
        self,
        owner: str,
        requests: Sequence[ReservationRequest],
        *,
        audit: AuditOf[Reserved] | None = None,
    ) -> Reserved:
        """Replace ``owner``'s reservations with ``requests``, all or none, in one transaction:
        each charged to its node's ``used`` under the node guard (never an over-commit), the
        ones it replaces credited. A refusal (``made`` false) writes nothing."""
        ...

    async def reservations(self, owner: str | None = None) -> list[Reservation]:
        """The stored reservations (of ``owner``, or all), by placement id."""
        ...

    async def end_reservations(self, owner: str) -> int:
        """Delete ``owner``'s reservations, crediting their nodes (floored); how many ended."""
        ...


@runtime_checkable
class CapacityLedger(
    LedgerLifecycle,
    NodeInventory,
    Admissions,
    RoomReservations,
    ClaimBook,
    LedgerReconciler,
    AuditTrail,
    Protocol,
):
    """The guarded capacity ledger: every role above, over one database.

    What a ledger plugin returns and the composition root holds (one object for every role).
    Nodes, placements, claims, the cluster row and the audit trail share its transactions.
    """


# --- cluster gateway (issue: rotation controller) --------------------------------------------


@runtime_checkable
class ClusterGateway(Protocol):
    """A cluster with Karpenter NodePools, as the rotation controller sees and changes it.

    Implementations: the fake cluster (in memory, virtual time) and the Karpenter gateway. Every
    write is idempotent where Kubernetes allows it (deleting what is gone is a no-op) so that a
    controller restarted after any side effect can simply re-issue it. Writes raise
    ``ClusterConflict`` (stale version) or ``ObjectNotFound`` (the object is gone); the controller
    treats both as "requeue", never as a failure of the rotation.
    """

    async def list_pools(self) -> Sequence[str]:
        """Return the names of every NodePool, sorted."""
        ...

    async def observe(self, pool: str) -> PoolObservation | None:
        """Read one NodePool with its NodeClaims, Nodes, their Pods and the pool's placeholders.

        Returns None when the pool does not exist. The observation carries the NodePool's
        ``version``, which a conditional ``annotate_pool`` must match. Raises
        ``ObjectUnreadable`` (naming the object and the field) when an object of the pool holds
        a value that cannot be read; the caller holds that pool.
        """
        ...

    async def list_policies(self) -> Sequence[Mapping[str, Any]] | None:
        """Return the RotationPolicy manifests the cluster carries (parsed YAML/JSON objects).

        None when this backend does not carry policies (the controller then uses its files).
        """
        ...

    async def annotate_pool(
        self, pool: str, patch: Mapping[str, str | None], *, expect_version: str | None = None
    ) -> str:
        """Merge-patch the NodePool's annotations (a None value deletes the key).

        With ``expect_version``, the write happens only if the pool's version still equals it,
        else ``ClusterConflict`` (the anchor write: optimistic lock on the version read at the
        start of the pass). Returns the pool's new version.
        """
        ...

    async def annotate_claim(self, name: str, patch: Mapping[str, str | None]) -> None:
        """Merge-patch a NodeClaim's annotations (a None value deletes the key)."""
        ...

    async def annotate_node(self, name: str, patch: Mapping[str, str | None]) -> None:
        """Merge-patch a Node's annotations: the freeze/unfreeze and cordon markers."""
        ...

    async def set_unschedulable(self, node: str, unschedulable: bool) -> None:
        """Cordon (True) or uncordon (False) a Node: ``spec.unschedulable``."""
        ...

    async def create_placeholder(self, spec: PlaceholderSpec) -> None:
        """Create the placeholder Pod; one of the same namespace and name already there is kept."""
        ...

    async def delete_placeholder(self, namespace: str, name: str) -> None:
        """Delete a placeholder Pod; a Pod already gone is not an error."""
        ...

    async def delete_claim(self, name: str) -> None:
        """Delete a NodeClaim: Karpenter drains its node (PDBs apply) then removes it.

        A claim already deleting or gone is not an error.
        """
        ...

    async def write_policy_status(self, name: str, status: PolicyStatus) -> bool:
        """Replace the RotationPolicy's ``status`` (its status subresource) with ``status``.

        Returns False when the write lost a conflict (the caller requeues silently and writes
        again on a later pass); raises ``ObjectNotFound`` when the cluster has no such policy
        (a policy read from a file).
        """
        ...


# --- running on a real cluster (issue: Karpenter backend) -----------------------------------


@runtime_checkable
class Leadership(Protocol):
    """One actor among replicas: a Kubernetes Lease held by at most one of them at a time."""

    @property
    def is_leader(self) -> bool:
        """True while this replica holds the lease (readiness follows it)."""
        ...

    async def run(self, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Campaign, run ``work`` only while leading (cancelled on loss, then campaign again),
        and release the lease on return or cancellation."""
        ...


@runtime_checkable
class ClusterRuntime(Protocol):
    """What a cluster backend that talks to a real cluster offers besides ``ClusterGateway``.

    The controller command uses it when present: connect, prove the cluster serves what the
    controller needs (fail fast, with an actionable message), elect one leader among the
    replicas, and report events natively. The fake cluster has none of it and needs none.
    """

    async def start(self) -> None:
        """Connect (idempotent)."""
        ...

    async def close(self) -> None:
        """Disconnect."""
        ...

    async def preflight(self) -> None:
        """Raise an error whose message says what is missing and what to do, or return."""
        ...

    def leader_elector(self) -> Leadership:
        """The election this replica takes part in."""
        ...

    def event_sink(self) -> EventSink:
        """An ``EventSink`` that records rotation events on the cluster's objects."""
        ...

    async def watch(self, poke: Callable[[str | None], None]) -> None:
        """Until cancelled, call ``poke(pool)`` (None: every pool) as soon as something a pass
        waits for changes. Only a shortcut: the controller's requeues stay the source of truth."""
        ...


@runtime_checkable
class SimulatedCluster(ClusterGateway, Protocol):
    """A cluster backend that runs in virtual time: what the simulator and ``fleetgate up`` call.

    They build a fleet on it (``add_pool``, ``add_node``), move it through time
    (``next_event_at``, ``advance_to``) and follow its nodes (``subscribe``). The fake cluster
    is one; a real cluster is never. Durations are a ``timedelta`` or a string like ``"15m"``.
    """

    def add_pool(
        self,
        name: str,
        *,
        expire_after: timedelta | str | None,
        termination_grace_period: timedelta | str | None = None,
        labels: Mapping[str, str] | None = None,
        node_allocatable: Mapping[str, int] | None = None,
        provisioning_delay: timedelta | str | None = None,
        drain_time: timedelta | str | None = None,
        limits: Mapping[str, int] | None = None,
        replicas: int | None = None,
        ready: bool = True,
        budgets: Sequence[Budget] | None = None,
    ) -> object:
        """Create a NodePool (``expire_after`` None: never expires; ``limits`` its
        ``spec.limits``, ``nodes`` in milli-units; ``replicas`` set: static; ``ready`` False:
        its Ready condition is False; ``budgets`` its ``spec.disruption.budgets``, None: the
        CRD's default)."""
        ...

    def add_node(
        self,
        pool: str,
        name: str | None = None,
        *,
        created_at: datetime | None = None,
        expire_after: timedelta | str | None = ...,
        termination_grace_period: timedelta | str | None = ...,
        workload: Mapping[str, int] | None = None,
        allocatable: Mapping[str, int] | None = None,
    ) -> str:
        """Add a Ready node to ``pool`` (the expiry and tGP default to the pool's; its size
        ``allocatable``, default the pool's); its name."""
        ...

    def add_pod(
        self,
        namespace: str,
        name: str,
        *,
        node: str | None = None,
        requests: Mapping[str, int] | None = None,
        pool: str | None = None,
        annotations: Mapping[str, str] | None = None,
        started_at: datetime | None = None,
    ) -> None:
        """Add a Pod, bound to ``node`` or Pending (``annotations`` may opt it out of
        disruption; a duration opt-out counts from ``started_at``)."""
        ...

    def add_pdb(
        self,
        namespace: str,
        name: str,
        *,
        match_labels: Mapping[str, str],
        min_available: int | str | None = None,
        max_unavailable: int | str | None = None,
        unhealthy_policy: str = "IfHealthyBudget",
    ) -> None:
        """Add a PodDisruptionBudget (one bound, a count or ``"N%"``): Karpenter's drains then
        evict the Pods it selects only as it allows, and force them at terminationGracePeriod."""
        ...

    def set_drifted(self, claim: str, drifted: bool = True) -> None:
        """Set a claim's ``Drifted`` condition (Karpenter will replace it itself)."""
        ...

    def disrupt_at(self, claim: str, at: datetime, reason: str = "Underutilized") -> None:
        """Have Karpenter start replacing ``claim`` itself at ``at`` (make before break)."""
        ...

    def next_event_at(self) -> datetime | None:
        """The next instant the cluster changes by itself, or None when nothing is due."""
        ...

    def advance_to(self, instant: datetime) -> None:
        """Move virtual time to ``instant`` and apply everything that falls due by then."""
        ...

    def watch(self, check: Callable[[datetime], None] | None) -> None:
        """From now on call ``check`` with each happening's instant before the happening is
        applied, by whichever call applies it (None: stop). A caller bounding its wall-clock
        time raises from it, so a long catch-up (a whole fleet expiring at once) stops between
        two happenings."""
        ...

    def subscribe(self, listener: Callable[[object], None]) -> Callable[[], None]:
        """Call ``listener`` on every node change; return a function that unsubscribes it."""
        ...


# --- API tokens (issue: HTTP API) ------------------------------------------------------------


@runtime_checkable
class TokenStore(Protocol):
    """Namespace bearer tokens, kept as digests (never the secret). The SQL ledger implements it.

    Token ids are opaque strings. A revoked token stays readable (with ``revoked_at``) so the
    admin can see what existed; it no longer authenticates. A store that cannot reach its database
    raises ``LedgerUnavailable``; bad input raises ``ValueError`` naming the field.
    """

    async def create_token(
        self,
        namespace: str,
        token_digest: str,
        at: datetime,
        *,
        audit: AuditOf[ApiToken] | None = None,
    ) -> ApiToken:
        """Store a new active token for ``namespace`` with the digest of its secret; ``audit``'s
        events commit in the same transaction."""
        ...

    async def token_by_digest(self, token_digest: str) -> ApiToken | None:
        """The token whose secret has this digest (active or revoked), or None."""
        ...

    async def list_tokens(self, namespace: str) -> Sequence[ApiToken]:
        """Every token of ``namespace``, revoked ones included, oldest first."""
        ...

    async def revoke_token(
        self, namespace: str, token_id: str, at: datetime, *, audit: AuditOf[bool] | None = None
    ) -> bool:
        """Revoke an active token of ``namespace``; False if there is none with that id.
        ``audit`` (given the result: none for False) commits in the same transaction."""
        ...
