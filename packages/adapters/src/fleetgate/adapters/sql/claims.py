"""Namespace claims in the ledger: create, read, list, update and delete, one transaction each.

Each write locks what it reads before reading it, in the one order every capacity transaction
uses (decision 16) — placement rows, the namespace's claim row, the cluster row, node rows — so
the domain decides on values no concurrent admission can change before commit, and claim churn
under load closes no lock cycle:

* create: the namespace's placement rows as they are (their usage is migrated into the claim,
  and a release of one of them must see which side it is charged to), its claim row (``exists``,
  or a claim past ``expires_at`` that is expired first), the new claim row (inserted before the
  cluster row: the INSERT may wait for admissions' gap locks, and they for the cluster row),
  the cluster row; then placements admitted meanwhile, skipping any a release holds.
  ``claims.active_namespace`` is UNIQUE, so of two racing creates the database lets exactly one
  commit; the other answers ``exists``.
* update: the claim row (an active one through ``active_namespace``, as admissions lock it), then
  the cluster row when a limit moves or the claim is expired.
* delete: the claim row likewise, then the cluster row when the claim was active.

They run at READ COMMITTED (``CLAIM_ISOLATION``): no gap locks on MariaDB, and no snapshot older
than the statement for its snapshot isolation to refuse a later write against. The writes are
compare-and-set: their WHERE restates the values the domain decided on. Under the locks they
always match; if one ever does not, the whole transaction is run again (at most ``ATTEMPTS``
times, then ``conflict``) rather than write over a change it did not see.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import ColumnElement

from fleetgate.adapters.sql.engine import Store
from fleetgate.adapters.sql.events import Audited
from fleetgate.adapters.sql.guarded import lock_and_read_if_any, read_locked
from fleetgate.adapters.sql.rows import cluster_state, resources
from fleetgate.adapters.sql.schema import CLUSTER_ID, claims, cluster, placements
from fleetgate.adapters.sql.sqltypes import epoch, instant
from fleetgate.domain.capacity.accounting import ClusterChange
from fleetgate.domain.capacity.claims import (
    Claim,
    ClaimDeletion,
    ClaimOutcome,
    ClaimRefusal,
    ClaimRequest,
    ClaimState,
    ClaimUpdate,
    RefusalReason,
    plan_create,
    plan_release,
    plan_update,
)
from fleetgate.domain.capacity.dimensions import ALLOCATION, Resources
from fleetgate.domain.capacity.errors import LedgerUnavailable
from fleetgate.domain.capacity.model import ClusterState

#: Attempts of a claim transaction whose compare-and-set missed (capacity spec 8's 4).
ATTEMPTS = 4
#: The isolation level of every claim write. A create reads the namespace's placements by a
#: range of the (namespace, …) index: under MariaDB's REPEATABLE READ that range scan takes
#: next-key locks, which block the admissions' placement INSERTs while those admissions hold
#: the cluster row the create waits for. At READ COMMITTED it locks the rows it reads and no
#: gaps, and the one plain read that opens an update or a delete (to find the index an
#: admission locks the claim by) sees a fresh statement snapshot, so MariaDB's snapshot
#: isolation has no older snapshot to refuse a later write against. Every value a write
#: decides on is read under a lock. PostgreSQL's default is READ COMMITTED already.
CLAIM_ISOLATION = "READ COMMITTED"
#: Placement ids per UPDATE when a create names the placements it took over one by one.
_ID_BATCH = 500


class Stale(Exception):
    """A compare-and-set matched no row: the transaction is rolled back and run again."""


class Refused(Exception):
    """Raised inside a transaction to roll it back; carries the refusal out."""

    def __init__(self, refusal: ClaimRefusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


# --- rows -------------------------------------------------------------------------------------


def claim_of(row: Mapping[Any, Any]) -> Claim:
    """A ``claims`` row as a Claim (with its *stored* state)."""
    return Claim(
        id=row["id"],
        namespace=row["namespace"],
        limit=resources(row, "limit_"),
        used=resources(row, "used_"),
        state=ClaimState(row["state"]),
        expires_at=instant(row["expires_at"]),
        created_at=instant(row["created_at"]),
        updated_at=instant(row["updated_at"]),
    )


def _columns(prefix: str, amount: Resources) -> dict[str, int]:
    return {f"{prefix}{d}": amount.get(d) for d in ALLOCATION}


def _equal(table: sa.Table, prefix: str, amount: Resources) -> list[ColumnElement[bool]]:
    return [table.c[f"{prefix}{d}"] == amount.get(d) for d in ALLOCATION]


async def _lock_read(
    conn: AsyncConnection, table: sa.Table, key: ColumnElement[bool]
) -> dict[str, Any] | None:
    """Lock the keyed row (no-op UPDATE) and read it under that lock; None if there is none."""
    return await lock_and_read_if_any(conn, table, key)


async def _lock_claim(
    conn: AsyncConnection, claim_id: str, namespace: str | None
) -> dict[str, Any] | None:
    """Lock a claim row by the index an admission locks it by; None if there is none.

    An admission locks its namespace's claim through the ``active_namespace`` index, then the
    row. On MariaDB a write that locked the row first would then need that index entry (a
    delete removes it, an expiry rewrites it) while the admission holds it and waits for the
    row: a deadlock. So an active claim is locked by its namespace, like an admission does; a
    claim no longer active has no entry an admission looks up, and is locked by its id.
    """
    key = _key(claim_id, namespace)
    found = (await conn.execute(sa.select(claims.c.active_namespace).where(key))).first()
    if found is None:
        return None
    if found[0] is None:
        return await _lock_read(conn, claims, key)
    row = await _lock_read(conn, claims, claims.c.active_namespace == found[0])
    if row is None or row["id"] != claim_id:
        raise Stale(f"claim {claim_id} changed before its lock")
    return row


async def _lock_cluster(conn: AsyncConnection) -> ClusterState | None:
    row = await _lock_read(conn, cluster, cluster.c.id == CLUSTER_ID)
    return None if row is None else cluster_state(row)


async def _write_cluster(
    conn: AsyncConnection, before: ClusterState, change: ClusterChange, now: float
) -> ClusterState:
    """Compare-and-set the cluster's claimed and unclaimed sums to what the domain decided."""
    result = await conn.execute(
        sa.update(cluster)
        .where(
            cluster.c.id == CLUSTER_ID,
            *_equal(cluster, "claimed_", before.claimed),
            *_equal(cluster, "unclaimed_used_", before.unclaimed_used),
        )
        .values(
            **_columns("claimed_", change.claimed),
            **_columns("unclaimed_used_", change.unclaimed_used),
            updated_at=now,
        )
    )
    if result.rowcount != 1:
        raise Stale("the cluster row changed under its lock")
    return ClusterState(before.total, change.claimed, change.unclaimed_used, instant(now))


async def _retire(conn: AsyncConnection, claim: Claim, now: float) -> None:
    """Mark a stored-active claim expired (its row only: the cluster row is written later)."""
    result = await conn.execute(
        sa.update(claims)
        .where(claims.c.id == claim.id, claims.c.state == ClaimState.ACTIVE.value)
        .values(state=ClaimState.EXPIRED.value, active_namespace=None, updated_at=now)
    )
    if result.rowcount != 1:
        raise Stale(f"claim {claim.id} changed under its lock")


async def _give_back(
    conn: AsyncConnection, claim: Claim, row: ClusterState, now: float
) -> tuple[ClusterState, bool]:
    """Return a retired claim's limits and usage to the unclaimed side of the locked cluster row."""
    change = plan_release(claim, row)
    return await _write_cluster(conn, row, change, now), change.clamped


async def _expire(conn: AsyncConnection, claim: Claim, now: float) -> bool:
    """Expire a stored-active claim: its row first, then the cluster row (the admissions' order).

    Its limits and usage go back to the unclaimed side; returns whether a sum was clamped.
    Writing the claim row first matters on MariaDB: clearing ``active_namespace`` inserts into
    that unique index, which waits for admissions' gap locks there, and those admissions may be
    waiting for the cluster row, so the cluster row must not be held yet.
    """
    await _retire(conn, claim, now)
    row = await _lock_cluster(conn)
    if row is None:
        return False
    return (await _give_back(conn, claim, row, now))[1]


async def _write_claim(conn: AsyncConnection, claim_id: str, write: sa.Update) -> Claim:
    """Run ``write`` (a compare-and-set of one claim row this transaction holds) and return the
    row as written: ``UPDATE … RETURNING`` where the dialect has it (one round trip fewer while
    the claim and the cluster row are held), else the locked read after it. Stale if it
    matched no row."""
    if conn.dialect.update_returning:
        row = (await conn.execute(write.returning(*claims.c))).mappings().first()
        if row is None:
            raise Stale("the claim row changed under its lock")
        return claim_of(row)
    result = await conn.execute(write)
    if result.rowcount != 1:
        raise Stale("the claim row changed under its lock")
    return await _reread(conn, claim_id)


async def _reread(conn: AsyncConnection, claim_id: str) -> Claim:
    row = await read_locked(conn, claims, claims.c.id == claim_id)
    if row is None:  # pragma: no cover - the claim is locked by this transaction
        raise Stale(f"claim {claim_id} vanished under its lock")
    return claim_of(row)


async def _run(
    store: Store,
    work: Any,
    what: str,
    isolation: str | None = None,
    trail: Audited[ClaimOutcome] | None = None,
) -> Any:
    """``store.write`` with the optimistic retry of a missed compare-and-set; ``trail``'s
    events commit with the change."""
    for _ in range(ATTEMPTS):
        try:
            return await (trail or Audited(None)).write(store, work, what=what, isolation=isolation)
        except Stale:
            continue
    return ClaimOutcome(
        refusal=ClaimRefusal(
            RefusalReason.CONFLICT,
            f"{what}: the ledger kept changing under the operation; try again",
        )
    )


# --- create -----------------------------------------------------------------------------------


async def create_in(
    conn: AsyncConnection, request: ClaimRequest, claim_id: str, now_epoch: float
) -> ClaimOutcome:
    """The whole create inside the caller's transaction (raises Refused to roll back)."""
    now = instant(now_epoch)
    ns = request.namespace
    in_ns = placements.c.namespace == ns
    # 1. The namespace's placements as they are now, as a release takes its placement first:
    #    their usage moves into the claim, and no release may credit the unclaimed side for one
    #    of them between our read and our commit. Record locks only (no gap locks: see
    #    CREATE_ISOLATION), so admissions keep inserting placements meanwhile. They are pointed
    #    at the new claim now (invisible until commit, undone if it never does), so that after
    #    the cluster row only placements admitted meanwhile are left to write.
    await conn.execute(sa.update(placements).where(in_ns).values(claim_id=claim_id))
    # 2. The namespace's claim row, if any, as an admission takes it first.
    existing = await _lock_read(conn, claims, claims.c.active_namespace == ns)
    retired: Claim | None = None
    if existing is not None:
        current = claim_of(existing)
        if current.is_active(now):
            raise Refused(
                ClaimRefusal(
                    RefusalReason.EXISTS,
                    f"namespace {ns} already has an active claim ({current.id})",
                )
            )
        # Past its expiry but not yet swept: expire it now, so the new claim can take its place.
        await _retire(conn, current, now_epoch)
        retired = current
    # 3. The new claim's row, before the cluster row: an INSERT into claims waits for the gap
    #    locks admissions hold on ``active_namespace``, and they may be waiting for the cluster
    #    row. Its values are placeholders, invisible until commit, set below once decided.
    await conn.execute(
        sa.insert(claims).values(
            id=claim_id,
            namespace=ns,
            **_columns("limit_", Resources()),
            **_columns("used_", Resources()),
            state=ClaimState.ACTIVE.value,
            active_namespace=ns,
            expires_at=now_epoch,
            created_at=now_epoch,
            updated_at=now_epoch,
        )
    )
    # 4. The cluster row. From here no placement of the namespace can be admitted (an
    #    unclaimed namespace's admission charges this row), so its usage is final.
    row = await _lock_cluster(conn)
    if row is None:
        raise Refused(
            ClaimRefusal(
                RefusalReason.NO_CLUSTER_CAPACITY,
                "the cluster row is missing: no claim can be promised (run `fleetgate db upgrade`)",
            )
        )
    clamped = False
    if retired is not None:
        row, clamped = await _give_back(conn, retired, row, now_epoch)
    migrated, fresh = await _migrating(conn, in_ns, claim_id)
    plan = plan_create(request, row, migrated, now)
    if isinstance(plan, ClaimRefusal):
        raise Refused(plan)
    await _write_cluster(conn, row, plan.cluster, now_epoch)
    written = await _write_claim(
        conn,
        claim_id,
        sa.update(claims)
        .where(claims.c.id == claim_id)
        .values(
            **_columns("limit_", plan.limit),
            **_columns("used_", plan.used),
            expires_at=epoch(plan.expires_at),
        ),
    )
    # Placements admitted after step 1 are pointed at the claim too, by id, never by the
    # namespace: a scan may read rows this transaction does not hold (a skipped one; on MariaDB
    # with snapshot isolation, where an UPDATE's scan does not skip locked rows it does not
    # match, even another namespace's) and wait for them while holding the cluster row, and a
    # release holding such a row waits for a claim or the cluster row: a cycle (issue 45).
    if fresh:
        for start in range(0, len(fresh), _ID_BATCH):
            batch = fresh[start : start + _ID_BATCH]
            await conn.execute(
                sa.update(placements).where(placements.c.id.in_(batch)).values(claim_id=claim_id)
            )
    return ClaimOutcome(
        claim=written,
        clamped=clamped or plan.cluster.clamped,
        expired=None if retired is None else retired.effective(now),
    )


async def _migrating(
    conn: AsyncConnection, in_ns: ColumnElement[bool], claim_id: str
) -> tuple[Resources, list[str]]:
    """The usage that moves into the new claim, and the placements admitted since step 1.

    Placements admitted after step 1 are locked now, skipping any another transaction holds:
    that is a release (or a move) which locked its placement before it waits for the cluster
    row we hold, so waiting for it would be a cycle. Skipped, such a placement stays charged to
    the unclaimed side and keeps its claim id, which is where its release will credit it.
    """
    locked = await conn.execute(
        sa.select(
            placements.c.id,
            placements.c.claim_id,
            placements.c.cpus,
            placements.c.memory_mb,
            placements.c.disk_gb,
        )
        .where(in_ns)
        .with_for_update(skip_locked=True)
    )
    migrated = Resources()
    fresh: list[str] = []
    for placement_id, current, cpus, memory_mb, disk_gb in locked:
        if current != claim_id:
            fresh.append(str(placement_id))
        migrated = migrated.plus(Resources(int(cpus), int(memory_mb), int(disk_gb)))
    return migrated, fresh


async def create(
    store: Store, request: ClaimRequest, trail: Audited[ClaimOutcome] | None = None
) -> ClaimOutcome:
    """Create a claim for ``request.namespace``, or say why not (``exists``, ``capacity``...)."""
    claim_id = str(uuid.uuid4())

    async def work(conn: AsyncConnection) -> ClaimOutcome:
        return await create_in(conn, request, claim_id, store.now_epoch())

    what = f"create claim for {request.namespace}"
    try:
        outcome: ClaimOutcome = await _run(store, work, what, CLAIM_ISOLATION, trail)
    except Refused as refused:
        return ClaimOutcome(refusal=refused.refusal)
    except IntegrityError:
        # A racing create committed first: the unique active_namespace let only one through.
        return ClaimOutcome(
            refusal=ClaimRefusal(
                RefusalReason.EXISTS, f"namespace {request.namespace} already has an active claim"
            )
        )
    return outcome


# --- reads ------------------------------------------------------------------------------------


def _key(claim_id: str, namespace: str | None) -> ColumnElement[bool]:
    key = claims.c.id == claim_id
    return key if namespace is None else sa.and_(key, claims.c.namespace == namespace)


async def get(store: Store, claim_id: str, namespace: str | None = None) -> Claim | None:
    """One claim as readers see it now (state = effective coverage); None if absent.

    With ``namespace``, a claim of another namespace is absent too.
    """

    async def work(conn: AsyncConnection) -> Claim | None:
        row = (await conn.execute(sa.select(claims).where(_key(claim_id, namespace)))).first()
        return None if row is None else claim_of(row._mapping).effective(store.now())

    found: Claim | None = await store.read(work, what=f"read claim {claim_id}")
    return found


async def list_claims(store: Store, namespace: str | None = None) -> list[Claim]:
    """Claims (expired ones included), oldest first, as readers see them now."""
    query = sa.select(claims).order_by(claims.c.created_at, claims.c.id)
    if namespace is not None:
        query = query.where(claims.c.namespace == namespace)

    async def work(conn: AsyncConnection) -> list[Claim]:
        now = store.now()
        return [claim_of(r).effective(now) for r in (await conn.execute(query)).mappings()]

    found: list[Claim] = await store.read(work, what="read claims")
    return found


# --- update -----------------------------------------------------------------------------------


def _not_found(claim_id: str) -> ClaimOutcome:
    return ClaimOutcome(
        refusal=ClaimRefusal(RefusalReason.NOT_FOUND, f"namespace claim {claim_id} not found")
    )


async def update_in(
    conn: AsyncConnection,
    claim_id: str,
    change: ClaimUpdate,
    namespace: str | None,
    now_epoch: float,
) -> ClaimOutcome:
    """The whole update inside the caller's transaction (raises Refused to roll back)."""
    now = instant(now_epoch)
    locked = await _lock_claim(conn, claim_id, namespace)
    if locked is None:
        return _not_found(claim_id)
    claim = claim_of(locked)
    expired: Claim | None = None
    if claim.is_due(now):
        # Effective since expires_at: store it, and answer not_active like any expired claim.
        await _expire(conn, claim, now_epoch)
        claim = expired = await _reread(conn, claim_id)
    moves = change.limit_after(claim.limit) != claim.limit
    row = await _lock_cluster(conn) if moves and claim.is_active(now) else None
    plan = plan_update(claim, change, row, now)
    if isinstance(plan, ClaimRefusal):
        if plan.reason is RefusalReason.NOT_ACTIVE:
            return ClaimOutcome(refusal=plan, expired=expired)  # commit a just-stored expiry
        raise Refused(plan)
    if plan.cluster is not None:
        assert row is not None
        await _write_cluster(conn, row, plan.cluster, now_epoch)
    written = await _write_claim(
        conn,
        claim.id,
        sa.update(claims)
        .where(
            claims.c.id == claim.id,
            claims.c.state == ClaimState.ACTIVE.value,
            *_equal(claims, "limit_", claim.limit),
            *_equal(claims, "used_", claim.used),
        )
        .values(
            **_columns("limit_", plan.limit),
            expires_at=epoch(plan.expires_at),
            updated_at=now_epoch,
        ),
    )
    clamped = plan.cluster is not None and plan.cluster.clamped
    return ClaimOutcome(claim=written, clamped=clamped)


async def update(
    store: Store,
    claim_id: str,
    change: ClaimUpdate,
    namespace: str | None = None,
    trail: Audited[ClaimOutcome] | None = None,
) -> ClaimOutcome:
    """Apply a field-masked update, or say why not (``not_active``, ``below_usage``...)."""

    async def work(conn: AsyncConnection) -> ClaimOutcome:
        return await update_in(conn, claim_id, change, namespace, store.now_epoch())

    try:
        outcome: ClaimOutcome = await _run(
            store, work, f"update claim {claim_id}", CLAIM_ISOLATION, trail
        )
    except Refused as refused:
        return ClaimOutcome(refusal=refused.refusal)
    return outcome


# --- delete -----------------------------------------------------------------------------------


async def delete_in(
    conn: AsyncConnection, claim_id: str, namespace: str | None, now_epoch: float
) -> ClaimDeletion:
    """The whole delete inside the caller's transaction."""
    locked = await _lock_claim(conn, claim_id, namespace)
    if locked is None:
        return ClaimDeletion(deleted=False)
    claim = claim_of(locked)
    returned = Resources()
    clamped = False
    if claim.state is ClaimState.ACTIVE:
        row = await _lock_cluster(conn)
        if row is not None:
            change = plan_release(claim, row)
            await _write_cluster(conn, row, change, now_epoch)
            clamped = change.clamped
        returned = claim.used
    result = await conn.execute(
        sa.delete(claims).where(
            claims.c.id == claim.id,
            claims.c.state == claim.state.value,
            *_equal(claims, "limit_", claim.limit),
            *_equal(claims, "used_", claim.used),
        )
    )
    if result.rowcount != 1:
        raise Stale(f"claim {claim.id} changed under its lock")
    # Placements keep the id of a claim that no longer exists; a release then credits the
    # unclaimed side, which is where their usage now is.
    return ClaimDeletion(
        deleted=True, claim=claim.effective(instant(now_epoch)), returned=returned, clamped=clamped
    )


async def delete(
    store: Store,
    claim_id: str,
    namespace: str | None = None,
    trail: Audited[ClaimDeletion] | None = None,
) -> ClaimDeletion:
    """Delete a claim, returning its usage to the unclaimed side; ``deleted`` false if absent."""

    async def work(conn: AsyncConnection) -> ClaimDeletion:
        return await delete_in(conn, claim_id, namespace, store.now_epoch())

    for _ in range(ATTEMPTS):
        try:
            deletion: ClaimDeletion = await (trail or Audited(None)).write(
                store, work, what=f"delete claim {claim_id}", isolation=CLAIM_ISOLATION
            )
            return deletion
        except Stale:
            continue
    raise LedgerUnavailable(
        f"delete claim {claim_id}: the ledger kept changing under the operation; nothing changed"
    )


__all__ = [
    "ATTEMPTS",
    "Refused",
    "Stale",
    "claim_of",
    "create",
    "create_in",
    "delete",
    "delete_in",
    "get",
    "list_claims",
    "update",
    "update_in",
]
