"""Namespace claims in the SQL ledger: every transition, drawdown, enforcement, races, expiry.

Each test also asks a reconcile pass whether the counters the operations left behind equal the
recomputation from the placements: every claim transition must keep them exact, not merely
eventually right.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError

from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.sql import claims as claim_sql
from fleetgate.adapters.sql.guarded import lock
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.adapters.sql.schema import CLUSTER_ID, cluster
from fleetgate.adapters.sql.sqltypes import epoch
from fleetgate.domain.capacity.claims import (
    ClaimRequest,
    ClaimState,
    ClaimUpdate,
    RefusalReason,
)
from fleetgate.domain.capacity.denials import Stage
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.model import Admission, AdmitRequest, NodeSpec
from fleetgate.domain.ports import CapacityLedger
from tests.conftest import Backend
from tests.ledgers import open_ledger
from tests.ports import assert_implements

HOUR = 3600


async def fleet(ledger: SqlLedger, *sizes: tuple[str, int, int, int]) -> None:
    """Nodes with limits equal to the given capacity (default ratios: cpu × 3)."""
    for name, threads, memory_mb, disk_gb in sizes:
        await ledger.add_node(NodeSpec(name, Capacity(threads, memory_mb, disk_gb)))


async def place(ledger: SqlLedger, ns: str, node: str, size: Resources) -> str:
    admission = await ledger.admit(AdmitRequest(ns, node, size))
    assert admission.placement is not None, admission.denial
    return admission.placement.id


async def assert_exact(ledger: SqlLedger) -> None:
    """A reconcile pass finds nothing to correct."""
    summary = (await ledger.reconcile()).summary
    assert summary.clean, summary


def test_the_sql_ledger_implements_the_claim_part_of_the_port(ledger: SqlLedger) -> None:
    assert_implements(ledger, CapacityLedger)


async def test_create_migrates_the_namespaces_usage_golden_vector(backend: Backend) -> None:
    # Capacity spec 9.1: total 100 cpus, unclaimed 80 (40 of it ci-1's), a claim of 40 for ci-1.
    async with open_ledger(backend, cpu_overcommit=1.0) as ledger:
        await fleet(ledger, ("a", 60, 1000, 100), ("b", 40, 1000, 100))
        await place(ledger, "ci-1", "a", Resources(40, 0, 0))
        await place(ledger, "web", "b", Resources(40, 0, 0))
        outcome = await ledger.create_claim(ClaimRequest("ci-1", Resources(40, 0, 0), HOUR))
        assert outcome.ok and outcome.claim is not None
        assert outcome.claim.used == Resources(40, 0, 0)
        assert outcome.claim.state is ClaimState.ACTIVE
        row = await ledger.cluster()
        assert (row.total.cpus, row.claimed.cpus, row.unclaimed_used.cpus) == (100, 40, 40)
        assert {p.claim_id for p in await ledger.placements("ci-1")} == {outcome.claim.id}
        await assert_exact(ledger)


async def test_a_claim_nobody_can_promise_is_refused_with_its_dimensions(
    ledger: SqlLedger,
) -> None:
    await fleet(ledger, ("a", 10, 1000, 100))
    await place(ledger, "web", "a", Resources(20, 500, 0))
    outcome = await ledger.create_claim(ClaimRequest("ci", Resources(11, 100, 0), HOUR))
    assert outcome.refusal is not None and outcome.refusal.reason is RefusalReason.CAPACITY
    denial = outcome.refusal.denial
    assert denial is not None and denial.stage is Stage.CLUSTER
    assert denial.exceeded == {"cpus"}
    cpu = next(d for d in denial.dimensions if d.dimension == "cpus")
    assert (cpu.limit, cpu.used, cpu.requested) == (30.0, 20.0, 11.0)
    assert await ledger.claims("ci") == []
    assert (await ledger.cluster()).claimed == Resources()


async def test_a_second_active_claim_for_a_namespace_is_refused(ledger: SqlLedger) -> None:
    await fleet(ledger, ("a", 10, 1000, 100))
    first = await ledger.create_claim(ClaimRequest("ci", Resources(1, 0, 0), HOUR))
    second = await ledger.create_claim(ClaimRequest("ci", Resources(1, 0, 0), HOUR))
    assert first.ok
    assert second.refusal is not None and second.refusal.reason is RefusalReason.EXISTS
    assert len(await ledger.claims("ci")) == 1


async def test_two_racing_creates_leave_exactly_one_claim(backend: Backend) -> None:
    async with open_ledger(backend) as ledger:
        await fleet(ledger, ("a", 100, 100000, 1000))
        await place(ledger, "ci", "a", Resources(2, 10, 1))
        for _ in range(5):
            outcomes = await asyncio.gather(
                *(
                    ledger.create_claim(ClaimRequest("ci", Resources(4, 100, 10), HOUR))
                    for _ in range(4)
                )
            )
            winners = [o for o in outcomes if o.ok]
            losers = [o for o in outcomes if not o.ok]
            assert len(winners) == 1
            assert all(
                o.refusal is not None and o.refusal.reason is RefusalReason.EXISTS for o in losers
            )
            (claim,) = await ledger.claims("ci")
            assert claim.used == Resources(2, 10, 1)
            assert (await ledger.cluster()).claimed == Resources(4, 100, 10)
            await assert_exact(ledger)
            assert claim.id == winners[0].claim.id  # type: ignore[union-attr]
            assert (await ledger.delete_claim(claim.id)).deleted


async def test_drawdown_charges_the_claim_and_release_credits_it(ledger: SqlLedger) -> None:
    await fleet(ledger, ("a", 10, 10000, 100))
    made = await ledger.create_claim(ClaimRequest("ci", Resources(8, 4096, 40), HOUR))
    assert made.claim is not None
    pid = await place(ledger, "ci", "a", Resources(1, 1024, 8))
    claim = await ledger.claim(made.claim.id)
    assert claim is not None and claim.used == Resources(1, 1024, 8)
    row = await ledger.cluster()
    assert row.unclaimed_used == Resources() and row.claimed == Resources(8, 4096, 40)
    await assert_exact(ledger)
    assert (await ledger.release(pid)).released
    claim = await ledger.claim(made.claim.id)
    assert claim is not None and claim.used == Resources()
    await assert_exact(ledger)


async def test_advisory_overage_is_charged_to_the_cluster_row(ledger: SqlLedger) -> None:
    # Capacity spec 9.1's advisory vector: limit 8, used 6, admit 4 -> admitted, over on cpus.
    await fleet(ledger, ("a", 10, 100000, 1000))
    made = await ledger.create_claim(ClaimRequest("ci", Resources(8, 8192, 80), HOUR))
    assert made.claim is not None
    await place(ledger, "ci", "a", Resources(6, 0, 0))
    admission = await ledger.admit(AdmitRequest("ci", "a", Resources(4, 0, 0)))
    assert admission.placement is not None
    ((over),) = admission.claim_over_limit
    assert (over.dimension, over.limit, over.used, over.requested) == ("cpus", 8.0, 6.0, 4.0)
    claim = await ledger.claim(made.claim.id)
    assert claim is not None and claim.used.cpus == 10
    # The 2 over the limit are unclaimed usage: nobody else can be admitted into them.
    row = await ledger.cluster()
    assert row.claimed.cpus == 8 and row.unclaimed_used.cpus == 2
    await assert_exact(ledger)


async def test_hard_enforcement_refuses_with_the_exceeded_dimensions(backend: Backend) -> None:
    async with open_ledger(backend, enforcement="hard") as ledger:
        await fleet(ledger, ("a", 10, 100000, 1000))
        made = await ledger.create_claim(ClaimRequest("ci", Resources(8, 8192, 80), HOUR))
        assert made.claim is not None
        await place(ledger, "ci", "a", Resources(6, 0, 0))
        refused = await ledger.admit(AdmitRequest("ci", "a", Resources(4, 0, 0)))
        assert refused.denial is not None and refused.denial.stage is Stage.CLAIM
        assert refused.denial.exceeded == {"cpus"}
        claim = await ledger.claim(made.claim.id)
        assert claim is not None and claim.used.cpus == 6
        await assert_exact(ledger)


async def test_grow_shrink_to_usage_below_usage_zero_and_back(ledger: SqlLedger) -> None:
    await fleet(ledger, ("a", 10, 1000, 100))  # 30 cpus
    made = await ledger.create_claim(ClaimRequest("ci", Resources(10, 100, 10), HOUR))
    assert made.claim is not None
    cid = made.claim.id
    await place(ledger, "ci", "a", Resources(4, 0, 0))

    grown = await ledger.update_claim(cid, ClaimUpdate(limit_cpus=30))
    assert grown.claim is not None and grown.claim.limit.cpus == 30
    assert (await ledger.cluster()).claimed.cpus == 30
    too_big = await ledger.update_claim(cid, ClaimUpdate(limit_cpus=31))
    assert too_big.refusal is not None and too_big.refusal.reason is RefusalReason.CAPACITY
    assert too_big.refusal.denial is not None
    assert too_big.refusal.denial.dimensions[0].requested == 1.0  # the grow delta

    below = await ledger.update_claim(cid, ClaimUpdate(limit_cpus=3, limit_disk_gb=5))
    assert below.refusal is not None and below.refusal.reason is RefusalReason.BELOW_USAGE
    assert below.refusal.denial is not None and below.refusal.denial.exceeded == {"cpus"}
    to_usage = await ledger.update_claim(cid, ClaimUpdate(limit_cpus=4))
    assert to_usage.claim is not None and to_usage.claim.limit == Resources(4, 100, 10)
    await assert_exact(ledger)

    await ledger.release((await ledger.placements("ci"))[0].id)
    zero = await ledger.update_claim(
        cid, ClaimUpdate(limit_cpus=0, limit_memory_mb=0, limit_disk_gb=0)
    )
    assert zero.claim is not None and zero.claim.limit == Resources()
    assert (await ledger.cluster()).claimed == Resources()
    back = await ledger.update_claim(cid, ClaimUpdate(limit_cpus=5, limit_memory_mb=50))
    assert back.claim is not None and back.claim.limit == Resources(5, 50, 0)
    assert (await ledger.cluster()).claimed == Resources(5, 50, 0)
    await assert_exact(ledger)


async def test_re_dating_moves_expires_at_from_now(ledger: SqlLedger, clock: VirtualClock) -> None:
    await fleet(ledger, ("a", 10, 1000, 100))
    made = await ledger.create_claim(ClaimRequest("ci", Resources(1, 0, 0), HOUR))
    assert made.claim is not None
    assert made.claim.expires_at == clock.now() + timedelta(hours=1)
    clock.advance(timedelta(minutes=10))
    shorter = await ledger.update_claim(made.claim.id, ClaimUpdate(expires_in_seconds=60))
    assert shorter.claim is not None
    assert shorter.claim.expires_at == clock.now() + timedelta(seconds=60)
    assert shorter.claim.limit == Resources(1, 0, 0)


async def test_expiry_is_effective_at_expires_at_before_any_sweep(
    ledger: SqlLedger, clock: VirtualClock
) -> None:
    await fleet(ledger, ("a", 10, 1000, 100))
    made = await ledger.create_claim(ClaimRequest("ci", Resources(10, 0, 0), 60))
    assert made.claim is not None
    cid = made.claim.id
    await place(ledger, "ci", "a", Resources(2, 0, 0))
    clock.advance(timedelta(seconds=60))
    # Read as expired, no longer charged, not active for updates — with no sweep having run.
    claim = await ledger.claim(cid)
    assert claim is not None and claim.state is ClaimState.EXPIRED
    later = await ledger.admit(AdmitRequest("ci", "a", Resources(3, 0, 0)))
    assert later.placement is not None and later.claim_id is None
    refused = await ledger.update_claim(cid, ClaimUpdate(limit_cpus=20))
    assert refused.refusal is not None and refused.refusal.reason is RefusalReason.NOT_ACTIVE
    # The refused update stored the expiry: its usage and limits are back on the unclaimed side.
    row = await ledger.cluster()
    assert row.claimed == Resources() and row.unclaimed_used.cpus == 5
    await assert_exact(ledger)
    # A release of the placement charged to the claim before expiry credits the right side.
    first = next(p for p in await ledger.placements("ci") if p.claim_id == cid)
    assert (await ledger.release(first.id)).released
    await assert_exact(ledger)


async def test_a_new_claim_replaces_one_past_its_expiry(
    ledger: SqlLedger, clock: VirtualClock
) -> None:
    await fleet(ledger, ("a", 10, 1000, 100))
    old = await ledger.create_claim(ClaimRequest("ci", Resources(10, 0, 0), 60))
    assert old.claim is not None
    await place(ledger, "ci", "a", Resources(2, 0, 0))
    clock.advance(timedelta(seconds=61))
    await place(ledger, "ci", "a", Resources(3, 0, 0))  # unclaimed: the claim has expired
    new = await ledger.create_claim(ClaimRequest("ci", Resources(6, 0, 0), HOUR))
    assert new.claim is not None and new.claim.used.cpus == 5
    states = {c.id: c.state for c in await ledger.claims("ci")}
    assert states == {old.claim.id: ClaimState.EXPIRED, new.claim.id: ClaimState.ACTIVE}
    assert {p.claim_id for p in await ledger.placements("ci")} == {new.claim.id}
    await assert_exact(ledger)


async def test_delete_returns_usage_to_the_unclaimed_side_and_is_idempotent(
    ledger: SqlLedger,
) -> None:
    await fleet(ledger, ("a", 10, 1000, 100))
    made = await ledger.create_claim(ClaimRequest("ci", Resources(10, 100, 10), HOUR))
    assert made.claim is not None
    pid = await place(ledger, "ci", "a", Resources(3, 30, 3))
    gone = await ledger.delete_claim(made.claim.id)
    assert gone.deleted and gone.returned == Resources(3, 30, 3)
    assert gone.claim is not None and gone.claim.limit == Resources(10, 100, 10)
    row = await ledger.cluster()
    assert row.claimed == Resources() and row.unclaimed_used == Resources(3, 30, 3)
    assert not (await ledger.delete_claim(made.claim.id)).deleted
    await assert_exact(ledger)
    assert (await ledger.release(pid)).released  # credits the unclaimed side now
    assert (await ledger.cluster()).unclaimed_used == Resources()
    await assert_exact(ledger)


async def test_deleting_an_expired_claim_moves_nothing_twice(
    ledger: SqlLedger, clock: VirtualClock
) -> None:
    await fleet(ledger, ("a", 10, 1000, 100))
    made = await ledger.create_claim(ClaimRequest("ci", Resources(10, 0, 0), 60))
    assert made.claim is not None
    await place(ledger, "ci", "a", Resources(4, 0, 0))
    clock.advance(timedelta(minutes=2))
    assert (await ledger.reconcile()).summary.claims_expired == 1
    gone = await ledger.delete_claim(made.claim.id)
    assert gone.deleted and gone.returned == Resources()
    assert (await ledger.cluster()).unclaimed_used.cpus == 4
    await assert_exact(ledger)


async def test_another_namespaces_claim_is_absent(ledger: SqlLedger) -> None:
    await fleet(ledger, ("a", 10, 1000, 100))
    made = await ledger.create_claim(ClaimRequest("ci", Resources(1, 0, 0), HOUR))
    assert made.claim is not None
    cid = made.claim.id
    assert await ledger.claim(cid, namespace="web") is None
    assert await ledger.claim(cid, namespace="ci") is not None
    update = await ledger.update_claim(cid, ClaimUpdate(limit_cpus=2), namespace="web")
    assert update.refusal is not None and update.refusal.reason is RefusalReason.NOT_FOUND
    assert not (await ledger.delete_claim(cid, namespace="web")).deleted
    assert [c.id for c in await ledger.claims()] == [cid]
    assert await ledger.claims("web") == []


async def test_listing_includes_expired_claims_oldest_first(
    ledger: SqlLedger, clock: VirtualClock
) -> None:
    await fleet(ledger, ("a", 10, 1000, 100))
    first = await ledger.create_claim(ClaimRequest("ci", Resources(1, 0, 0), 30))
    clock.advance(timedelta(seconds=31))
    second = await ledger.create_claim(ClaimRequest("ci", Resources(2, 0, 0), HOUR))
    listed = await ledger.claims("ci")
    assert [c.id for c in listed] == [first.claim.id, second.claim.id]  # type: ignore[union-attr]
    assert [c.state for c in listed] == [ClaimState.EXPIRED, ClaimState.ACTIVE]


async def test_a_missing_cluster_row_refuses_creates_and_grows(ledger: SqlLedger) -> None:
    await fleet(ledger, ("a", 10, 1000, 100))
    made = await ledger.create_claim(ClaimRequest("ci", Resources(4, 0, 0), HOUR))
    assert made.claim is not None
    async with ledger.store.engine.begin() as conn:
        await conn.execute(sa.delete(cluster))
    refused = await ledger.create_claim(ClaimRequest("web", Resources(1, 0, 0), HOUR))
    assert refused.refusal is not None
    assert refused.refusal.reason is RefusalReason.NO_CLUSTER_CAPACITY
    grow = await ledger.update_claim(made.claim.id, ClaimUpdate(limit_cpus=5))
    assert grow.refusal is not None and grow.refusal.reason is RefusalReason.NO_CLUSTER_CAPACITY
    shrink = await ledger.update_claim(made.claim.id, ClaimUpdate(limit_cpus=3))
    assert shrink.ok
    # The next pass rebuilds the row from the nodes, the claims and the placements.
    report = await ledger.reconcile()
    assert report.reconciliation.cluster.created
    row = await ledger.cluster()
    assert row.total.cpus == 30 and row.claimed.cpus == 3
    await assert_exact(ledger)


async def test_an_admission_racing_a_claim_create_is_charged_where_the_claim_says(
    ledger: SqlLedger, clock: VirtualClock
) -> None:
    """The admission looked for the namespace's claim before the create committed it.

    The create holds the cluster row (as every create does) while the admission, having found
    no claim, waits for that row to charge the unclaimed side. Whichever way the database
    resolves it, the placement must end up charged to the side its namespace is on.
    """
    await fleet(ledger, ("a", 10, 1000, 100))
    await place(ledger, "ci", "a", Resources(1, 0, 0))
    admitting: asyncio.Task[Admission] | None = None
    try:
        async with ledger.store.engine.connect() as conn, conn.begin():
            await lock(conn, cluster, cluster.c.id == CLUSTER_ID)
            admitting = asyncio.create_task(
                ledger.admit(AdmitRequest("ci", "a", Resources(2, 0, 0)))
            )
            await asyncio.sleep(0.3)
            request = ClaimRequest("ci", Resources(6, 0, 0), HOUR)
            await claim_sql.create_in(conn, request, str(uuid.uuid4()), epoch(clock.now()))
    except DBAPIError as exc:
        # MariaDB may resolve the crossing locks as a deadlock and roll the create back.
        assert ledger.store.dialect.retryable(exc), exc
    assert admitting is not None
    admission = await admitting
    assert admission.placement is not None
    claims_now = await ledger.claims("ci")
    if claims_now:
        (claim,) = claims_now
        assert admission.claim_id == claim.id and claim.used.cpus == 3
    else:
        assert admission.claim_id is None
    await assert_exact(ledger)
