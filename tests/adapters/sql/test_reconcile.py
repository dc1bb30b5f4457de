"""The reconcile pass in the SQL ledger: repairs exactly the injected drift, decays demand,
sweeps expired claims, and never erases an admission that commits while it runs."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
import sqlalchemy as sa

from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.sql import reconcile as reconcile_sql
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.adapters.sql.schema import CLUSTER_ID, claims, cluster, nodes, placements
from fleetgate.adapters.sql.sqltypes import epoch
from fleetgate.domain.capacity.claims import ClaimRequest, ClaimState, ClaimUpdate
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.model import AdmitRequest, NodeSpec
from fleetgate.domain.capacity.reconcile import Drift, reconcile

HOUR = 3600


async def fleet(ledger: SqlLedger, *names: str, threads: int = 8) -> None:
    for name in names:
        await ledger.add_node(NodeSpec(name, Capacity(threads, 16384, 200)))


async def place(ledger: SqlLedger, ns: str, node: str, size: Resources, demand: float = 0.0) -> str:
    admission = await ledger.admit(AdmitRequest(ns, node, size, demand=demand))
    assert admission.placement is not None, admission.denial
    return admission.placement.id


async def execute(ledger: SqlLedger, statement: sa.Executable) -> None:
    async with ledger.store.engine.begin() as conn:
        await conn.execute(statement)


async def test_a_pass_over_an_empty_ledger_is_clean(ledger: SqlLedger) -> None:
    summary = (await ledger.reconcile()).summary
    assert summary.clean and summary.nodes == 0 and summary.duration_seconds > 0


async def test_the_pass_repairs_injected_drift_and_reports_exactly_it(ledger: SqlLedger) -> None:
    await fleet(ledger, "a", "b", "c")
    await place(ledger, "web", "a", Resources(2, 1024, 10))
    await place(ledger, "web", "b", Resources(1, 512, 5))
    made = await ledger.create_claim(ClaimRequest("ci", Resources(8, 4096, 50), HOUR))
    assert made.claim is not None
    await place(ledger, "ci", "c", Resources(4, 2048, 20))
    assert (await ledger.reconcile()).summary.clean

    await execute(
        ledger,
        sa.update(nodes)
        .where(nodes.c.name == "a")
        .values(used_cpus=nodes.c.used_cpus + 3, used_disk_gb=nodes.c.used_disk_gb - 4),
    )
    await execute(ledger, sa.update(nodes).where(nodes.c.name == "c").values(used_memory_mb=0))
    await execute(ledger, sa.update(claims).values(used_cpus=1))
    await execute(
        ledger, sa.update(cluster).values(unclaimed_used_cpus=cluster.c.unclaimed_used_cpus + 7)
    )

    report = await ledger.reconcile()
    drift = {n.name: n.drift for n in report.reconciliation.nodes}
    assert drift == {"a": Drift(-3, 0, 4), "b": Drift(), "c": Drift(0, 2048, 0)}
    summary = report.summary
    assert (summary.nodes, summary.drifted_nodes) == (3, 2)
    assert summary.drift == Resources(3, 2048, 4)
    assert summary.drifted_claims == 1
    (claim,) = report.reconciliation.claims
    assert claim.drift == Drift(3, 0, 0)
    assert report.reconciliation.cluster.drift["unclaimed_used"] == Drift(-7, 0, 0)

    a = await ledger.node("a")
    assert a is not None and a.used == Resources(2, 1024, 10)
    assert (await ledger.claim(made.claim.id)).used == Resources(4, 2048, 20)  # type: ignore[union-attr]
    assert (await ledger.cluster()).unclaimed_used == Resources(3, 1536, 15)
    second = (await ledger.reconcile()).summary
    assert second.clean and second.drift == Resources()


async def test_expected_demand_is_snapped_to_its_decayed_sum(
    ledger: SqlLedger, clock: VirtualClock
) -> None:
    await fleet(ledger, "a")
    await place(ledger, "web", "a", Resources(4, 0, 0), demand=2.4)
    clock.advance(timedelta(seconds=150))
    await place(ledger, "web", "a", Resources(2, 0, 0), demand=1.2)
    clock.advance(timedelta(seconds=150))
    report = await ledger.reconcile()
    (node,) = report.reconciliation.nodes
    # 2.4 at half its life (1.2) + 1.2 at a quarter (0.9)
    assert node.stored_expected_demand == pytest.approx(3.6)
    assert node.expected_demand == pytest.approx(2.1)
    assert (await ledger.node("a")).expected_demand == pytest.approx(2.1)  # type: ignore[union-attr]
    clock.advance(timedelta(seconds=600))
    await ledger.reconcile()
    assert (await ledger.node("a")).expected_demand == 0.0  # type: ignore[union-attr]
    assert report.summary.clean  # demand decaying is not drift


async def test_the_sweep_expires_due_claims_once(ledger: SqlLedger, clock: VirtualClock) -> None:
    await fleet(ledger, "a")
    made = await ledger.create_claim(ClaimRequest("ci", Resources(6, 0, 0), 60))
    assert made.claim is not None
    await place(ledger, "ci", "a", Resources(2, 0, 0))
    clock.advance(timedelta(seconds=60))
    first = await ledger.reconcile()
    assert [c.id for c in first.reconciliation.expired] == [made.claim.id]
    assert first.summary.claims_expired == 1 and first.summary.clean
    row = await ledger.cluster()
    assert row.claimed == Resources() and row.unclaimed_used.cpus == 2
    assert (await ledger.reconcile()).summary.claims_expired == 0
    # swept means stored: the row itself says expired now
    async with ledger.store.engine.connect() as conn:
        state = (await conn.execute(sa.select(claims.c.state))).scalar_one()
    assert state == ClaimState.EXPIRED.value


async def test_a_placement_pointing_at_the_wrong_side_is_reattributed(ledger: SqlLedger) -> None:
    await fleet(ledger, "a")
    made = await ledger.create_claim(ClaimRequest("ci", Resources(6, 0, 0), HOUR))
    assert made.claim is not None
    pid = await place(ledger, "ci", "a", Resources(2, 0, 0))
    await execute(ledger, sa.update(placements).values(claim_id=None))
    report = await ledger.reconcile()
    assert report.reattributed == 1 and not report.summary.clean
    assert (await ledger.placement(pid)).claim_id == made.claim.id  # type: ignore[union-attr]
    await ledger.release(pid)
    assert (await ledger.reconcile()).summary.clean


async def test_an_admission_committing_while_a_pass_runs_is_never_erased(
    ledger: SqlLedger, clock: VirtualClock
) -> None:
    await fleet(ledger, "a", "b")
    made = await ledger.create_claim(ClaimRequest("ci", Resources(10, 1024, 20), HOUR))
    assert made.claim is not None
    gone = await place(ledger, "web", "b", Resources(1, 10, 1))
    await place(ledger, "ci", "a", Resources(1, 10, 1))
    # Injected drift, so the pass has something to write over.
    await execute(ledger, sa.update(nodes).values(used_cpus=nodes.c.used_cpus + 5))

    in_flight: list[asyncio.Task[object]] = []
    async with ledger.store.engine.connect() as conn, conn.begin():
        now = clock.now()
        rows = await reconcile_sql.lock_counters(conn)
        snapshot = await reconcile_sql.read_snapshot(conn, ledger.store.dialect, rows, now, 600.0)
        # The pass has read. Now real operations start on their own connections: an unclaimed
        # admission and a claimed one on the node the pass is about to overwrite, a release,
        # and a claim grow.
        in_flight = [
            asyncio.create_task(ledger.admit(AdmitRequest("web", "a", Resources(3, 30, 3)))),
            asyncio.create_task(ledger.admit(AdmitRequest("ci", "a", Resources(2, 20, 2)))),
            asyncio.create_task(ledger.release(gone)),
            asyncio.create_task(ledger.update_claim(made.claim.id, ClaimUpdate(limit_cpus=12))),
        ]
        await asyncio.sleep(0.5)
        result = reconcile(snapshot, now, 600.0)
        await reconcile_sql.apply(conn, ledger.store.dialect, result, epoch(now))
    outcomes = await asyncio.gather(*in_flight)
    assert outcomes[0].placement is not None and outcomes[1].placement is not None  # type: ignore[attr-defined]
    assert outcomes[2].released  # type: ignore[attr-defined]
    assert outcomes[3].ok  # type: ignore[attr-defined]

    a = await ledger.node("a")
    assert a is not None and a.used == Resources(6, 60, 6)
    b = await ledger.node("b")
    assert b is not None and b.used == Resources()
    claim = await ledger.claim(made.claim.id)
    assert claim is not None and claim.used == Resources(3, 30, 3) and claim.limit.cpus == 12
    row = await ledger.cluster()
    assert row.unclaimed_used == Resources(3, 30, 3) and row.claimed.cpus == 12
    assert (await ledger.reconcile()).summary.clean


async def test_totals_are_recomputed_from_the_node_limits(
    ledger: SqlLedger,
) -> None:
    await fleet(ledger, "a", "b", threads=2)
    await execute(ledger, sa.update(cluster).where(cluster.c.id == CLUSTER_ID).values(total_cpus=0))
    report = await ledger.reconcile()
    assert report.reconciliation.cluster.drift["total"] == Drift(12, 0, 0)
    assert (await ledger.cluster()).total.cpus == 12
