"""The admission transaction on the database under test: the spec's live fixtures (9.1),
satisfiability of the demand clause, the claim branch, and the database-vs-domain property.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings

from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.sql.admission import SqlSteps
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.adapters.sql.postgres import admit_function
from fleetgate.domain.capacity.denials import Denial, DimensionDetail, Stage
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.errors import NodeNotFound
from fleetgate.domain.capacity.guards import evaluate, node_guard
from fleetgate.domain.capacity.model import Admission, AdmitRequest, NodeMetrics, NodeSpec
from fleetgate.domain.events import Event, Level
from fleetgate.domain.ports import AdmissionSteps
from tests.adapters.sql.seed import (
    claim_used,
    insert_claim,
    placement_count,
    set_cluster,
    set_node,
)
from tests.conftest import Backend
from tests.ledgers import START, open_ledger
from tests.ports import assert_implements
from tests.strategies import admit_params, node_guard_rows

INSTANCE = Resources(4, 4096, 40)


def request(node: str, size: Resources = INSTANCE, **kw: Any) -> AdmitRequest:
    kw.setdefault("demand", 10.0)
    kw.setdefault("target_load", 0.75)
    return AdmitRequest("team", node, size, **kw)


def dims(denial: Denial | None) -> dict[str, DimensionDetail]:
    assert denial is not None
    return {d.dimension: d for d in denial.dimensions}


@pytest.fixture
async def live(backend: Backend, clock: VirtualClock) -> AsyncIterator[SqlLedger]:
    """The spec's live fixture: node_a 12/12288/120 with 8/8192/80 used, idle node_b 64/65536/1000,
    both publishing cpu_schedulable 64 at load 0.5 (cpu overcommit 1.0 so limits are capacities)."""
    async with open_ledger(backend, clock, cpu_overcommit=1.0) as ledger:
        await ledger.add_node(NodeSpec("node_a", Capacity(12, 12288, 120)))
        await ledger.add_node(NodeSpec("node_b", Capacity(64, 65536, 1000)))
        for name in ("node_a", "node_b"):
            await ledger.publish_metrics(name, NodeMetrics(cpu_load_1=0.5, cpu_schedulable=64))
        seeded = await ledger.admit(request("node_a", Resources(8, 8192, 80), demand=0.0))
        assert seeded.admitted
        yield ledger


async def test_admit_charges_the_cluster_and_the_node(live: SqlLedger) -> None:
    admission = await live.admit(request("node_a"))
    assert admission.placement is not None and admission.denial is None
    assert admission.node is not None and admission.node.used == Resources(12, 12288, 120)
    assert admission.node.expected_demand == 10.0
    cluster = await live.cluster()
    assert cluster.total == Resources(76, 77824, 1120)
    assert cluster.unclaimed_used == Resources(12, 12288, 120)
    assert await placement_count(live) == 2
    assert await live.placement(admission.placement.id) == admission.placement


async def test_a_cpu_refusal_changes_nothing(live: SqlLedger) -> None:
    before = (await live.node("node_a"), await live.cluster())
    admission = await live.admit(request("node_a", Resources(8, 4096, 40)))
    assert not admission.admitted and admission.denial is not None
    assert admission.denial.stage is Stage.NODE
    cpus = dims(admission.denial)["cpus"]
    assert (cpus.limit, cpus.used, cpus.requested, cpus.exceeded) == (12, 8, 8, True)
    assert not dims(admission.denial)["memory_mb"].exceeded
    assert not dims(admission.denial)["disk_gb"].exceeded
    assert (await live.node("node_a"), await live.cluster()) == before
    assert await placement_count(live) == 1


async def test_a_loaded_node_refuses_on_demand_alone(live: SqlLedger) -> None:
    await live.publish_metrics("node_b", NodeMetrics(cpu_load_1=50.0, cpu_schedulable=64))
    denial = (await live.admit(request("node_b"))).denial
    demand = dims(denial)["demand"]
    assert (demand.limit, demand.used, demand.requested, demand.exceeded) == (48, 50, 10, True)
    assert demand.parts == {"cpu_load_1": 50.0, "expected_demand": 0.0}
    assert denial is not None and denial.demand_only
    assert not any(d.exceeded for d in denial.dimensions if d.dimension != "demand")


async def test_the_waived_clause_admits_the_same_node(live: SqlLedger) -> None:
    await live.publish_metrics("node_b", NodeMetrics(cpu_load_1=50.0, cpu_schedulable=64))
    admission = await live.admit(request("node_b", target_load=0.0))
    assert admission.admitted
    assert admission.node is not None and admission.node.expected_demand == 10.0  # still charged


async def test_the_cluster_guard_refuses_past_the_unclaimed_room(live: SqlLedger) -> None:
    await set_cluster(live, unclaimed_used_cpus=74)
    denial = (await live.admit(request("node_b"))).denial
    assert denial is not None and denial.stage is Stage.CLUSTER
    assert dims(denial)["cpus"].limit == 76 and dims(denial)["cpus"].used == 74


async def test_claimed_capacity_shrinks_the_unclaimed_room(live: SqlLedger) -> None:
    await set_cluster(live, claimed_cpus=68)
    denial = (await live.admit(request("node_b"))).denial
    assert denial is not None and denial.stage is Stage.CLUSTER
    assert dims(denial)["cpus"].limit == 8


async def test_an_unenforced_admission_charges_past_every_guard(live: SqlLedger) -> None:
    admission = await live.admit(request("node_a", Resources(100, 0, 0), enforce=False))
    assert admission.admitted
    assert [d.stage for d in admission.bypassed] == [Stage.CLUSTER, Stage.NODE]
    assert (await live.node("node_a")).used.cpus == 108  # type: ignore[union-attr]
    assert (await live.cluster()).unclaimed_used.cpus == 108


async def test_a_zero_sized_request_is_admitted(live: SqlLedger) -> None:
    # Matched-rows rowcount: an UPDATE that changes no counter still counts as "it fit".
    admission = await live.admit(request("node_a", Resources(0, 0, 0), demand=0.0))
    assert admission.admitted


async def test_an_unknown_node_rolls_back_the_cluster_charge(live: SqlLedger) -> None:
    before = await live.cluster()
    with pytest.raises(NodeNotFound):
        await live.admit(request("node_z"))
    assert await live.cluster() == before


async def test_a_cordoned_node_admits_nothing(live: SqlLedger) -> None:
    await live.cordon("node_b")
    denial = (await live.admit(request("node_b", Resources(0, 0, 0)))).denial
    assert denial is not None and denial.cordoned and not denial.demand_only
    await live.uncordon("node_b")
    assert (await live.admit(request("node_b"))).admitted


async def test_an_advisory_claim_is_charged_and_reports_its_overrun(live: SqlLedger) -> None:
    claim = await insert_claim(live, "team", Resources(8, 10_000, 100), Resources(6, 0, 0))
    cluster_before = await live.cluster()
    admission = await live.admit(request("node_b"))
    assert admission.admitted and admission.claim_id == claim
    assert admission.placement is not None and admission.placement.claim_id == claim
    over = [(d.dimension, d.limit, d.used, d.requested, d.exceeded)
            for d in admission.claim_over_limit]  # fmt: skip
    assert over == [("cpus", 8, 6, 4, True)]
    assert await claim_used(live, claim) == Resources(10, 4096, 40)
    # The 2 vCPUs above the claim are accounted on the cluster row, not lost (defect 5).
    after = await live.cluster()
    assert after.unclaimed_used == cluster_before.unclaimed_used.plus(Resources(2, 0, 0))


async def test_an_advisory_overrun_still_needs_cluster_room(live: SqlLedger) -> None:
    await insert_claim(live, "team", Resources(8, 10_000, 100), Resources(8, 0, 0))
    await set_cluster(live, claimed_cpus=66)  # unclaimed room: 76 - 66 - 8 = 2 < 4
    denial = (await live.admit(request("node_b"))).denial
    assert denial is not None and denial.stage is Stage.CLUSTER
    assert dims(denial)["cpus"].requested == 4


async def test_an_expired_claim_is_not_charged(live: SqlLedger, clock: VirtualClock) -> None:
    claim = await insert_claim(live, "team", Resources(8, 10_000, 100), expires_in=0.0)
    admission = await live.admit(request("node_b"))
    assert admission.admitted and admission.claim_id is None
    assert await claim_used(live, claim) == Resources()


async def test_a_hard_claim_refuses_at_its_limit(backend: Backend, clock: VirtualClock) -> None:
    async with open_ledger(backend, clock, enforcement="hard") as ledger:
        await ledger.add_node(NodeSpec("n", Capacity(64, 65536, 1000)))
        claim = await insert_claim(ledger, "team", Resources(8, 10_000, 100), Resources(6, 0, 0))
        denial = (await ledger.admit(request("n"))).denial
        assert denial is not None and denial.stage is Stage.CLAIM
        cpus = dims(denial)["cpus"]
        assert (cpus.limit, cpus.used, cpus.requested, cpus.exceeded) == (8, 6, 4, True)
        assert await claim_used(ledger, claim) == Resources(6, 0, 0)
        fits = await ledger.admit(request("n", Resources(2, 0, 0)))
        assert fits.admitted and fits.claim_over_limit == ()
        assert await claim_used(ledger, claim) == Resources(8, 0, 0)


async def test_a_request_id_admits_once(live: SqlLedger) -> None:
    first = await live.admit(request("node_b", request_id="job-7"))
    again = await live.admit(request("node_b", request_id="job-7"))
    assert again.replayed and again.placement == first.placement
    assert (await live.node("node_b")).used.cpus == 4  # type: ignore[union-attr]


async def test_every_admission_transaction_opens_with_an_update(
    live: SqlLedger, backend: Backend
) -> None:
    statements: list[str] = []
    engine = live.store.engine.sync_engine

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(" ".join(statement.split()).upper())

    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        await live.admit(request("node_b"))  # the unclaimed branch
        await insert_claim(live, "team", Resources(100, 100_000, 1000))
        statements.clear()
        await live.admit(request("node_b"))  # the claim branch
        claim_branch = list(statements)
        statements.clear()
        await live.admit(request("node_a", Resources(99, 0, 0)))  # a refusal
        refusal = list(statements)
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)
    for transaction in (claim_branch, refusal):
        body = [s for s in transaction if not s.startswith(("BEGIN", "PRAGMA", "SET "))]
        if live.one_call:  # PostgreSQL: one call, whose own first statement is the UPDATE
            assert body[0].startswith("SELECT FG_OUTCOME AS OUTCOME, FG_CLAIM_ID AS CLAIM_ID")
            assert "FLEETGATE_ADMIT(" in body[0]
            first = admit_function.definition().split("BEGIN", 1)[1].split(";")[0]
            assert first.strip().split("\n")[-1].lstrip().startswith("UPDATE claims")
            continue
        assert body[0].startswith("UPDATE")
        if backend.kind != "sqlite":  # every read inside is a locking read of a locked row
            assert all("FOR UPDATE" in s for s in body if s.startswith("SELECT"))


# --- satisfiability (capacity spec E5) --------------------------------------------------------


@pytest.mark.parametrize("schedulable", range(1, 17))
async def test_an_idle_node_admits_every_instance_size(ledger: SqlLedger, schedulable: int) -> None:
    await ledger.add_node(NodeSpec("idle", Capacity(64, 65536, 1000)))
    await ledger.publish_metrics("idle", NodeMetrics(cpu_load_1=0.0, cpu_schedulable=schedulable))
    for cpus in (1, 2, 4, 8, 16):
        admission = await ledger.admit(
            AdmitRequest(
                "team", "idle", Resources(cpus, 1024, 10), demand=cpus * 0.6, target_load=0.75
            )
        )
        assert admission.placement is not None, (schedulable, cpus, admission.denial)
        await ledger.release(admission.placement.id)
        await set_node(ledger, "idle", expected_demand=0.0)  # idle again for the next size


async def test_a_node_over_budget_refuses_on_demand_only(ledger: SqlLedger) -> None:
    await ledger.add_node(NodeSpec("busy", Capacity(64, 65536, 1000)))
    await ledger.publish_metrics("busy", NodeMetrics(cpu_load_1=0.45, cpu_schedulable=8))
    await set_node(ledger, "busy", expected_demand=8.0)  # the P9 lockout: 8.45 > 0.75 x 8
    denial = (await ledger.admit(AdmitRequest("team", "busy", Resources(1, 1, 1), demand=0.6,
                                              target_load=0.75))).denial  # fmt: skip
    assert denial is not None and denial.demand_only
    assert denial.exceeded == {"demand"}


async def test_a_spread_burst_refuses_only_once_the_budget_is_used(ledger: SqlLedger) -> None:
    # Defaults: a 12-thread idle node takes 15 one-vCPU placements (0.75 x 12 / 0.6) and then,
    # check-then-charge, one more before the clause sees itself over budget.
    await ledger.add_node(NodeSpec("n", Capacity(64, 65536, 1000)))
    await ledger.publish_metrics("n", NodeMetrics(cpu_load_1=0.0, cpu_schedulable=12))
    admitted = 0
    while True:
        admission = await ledger.admit(
            AdmitRequest("team", "n", Resources(1, 1, 1), demand=0.6, target_load=0.75)
        )
        if not admission.admitted:
            break
        admitted += 1
    assert admitted == 16
    assert admission.denial is not None and admission.denial.demand_only


# --- the database admits exactly when the domain says so --------------------------------------


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(row=node_guard_rows(), params=admit_params())
async def test_the_database_admits_exactly_when_the_domain_guard_does(
    ledger: SqlLedger, row: dict[str, object], params: dict[str, float | int]
) -> None:
    if await ledger.node("probe") is None:
        await ledger.add_node(NodeSpec("probe", Capacity(1, 1, 1)))
    for p in await ledger.placements():
        await ledger.release(p.id)
    big = 10**9
    await set_cluster(ledger, total_cpus=big, total_memory_mb=big, total_disk_gb=big)
    await set_node(ledger, "probe", **row)
    size = Resources(int(params["cpus"]), int(params["memory_mb"]), int(params["disk_gb"]))
    target = float(params["target_load"])
    admission = await ledger.admit(
        AdmitRequest("team", "probe", size, demand=float(params["demand"]), target_load=target)
    )
    verdict = evaluate(node_guard(target), row, {**params, "target_load": target})
    assert admission.admitted == verdict.passed
    if admission.denial is not None:
        failed = set(verdict.failed)
        assert admission.denial.exceeded == failed - {"schedulable"}
        assert admission.denial.cordoned == ("schedulable" in failed)


# --- the audit commits with the admission (issue 18 item 2) -----------------------------------


def placed_event(admission: Admission) -> list[Event]:
    assert admission.placement is not None
    return [Event("placed", START, admission.placement.id, "team", Level.INFO, {"n": 1})]


async def test_the_audit_events_commit_in_the_admission(live: SqlLedger) -> None:
    admission = await live.admit(request("node_b"), audit=placed_event)
    assert admission.placement is not None
    recorded = await live.events(subject=admission.placement.id)
    assert [r.event.kind for r in recorded] == ["placed"]


async def test_a_failed_audit_write_fails_the_admission_and_changes_nothing(
    live: SqlLedger,
) -> None:
    before = (await live.node("node_b"), await live.cluster(), await placement_count(live))

    def broken(admission: Admission) -> list[Event]:
        raise RuntimeError("the audit could not be written")

    with pytest.raises(RuntimeError, match="audit"):
        await live.admit(request("node_b"), audit=broken)
    assert (await live.node("node_b"), await live.cluster(), await placement_count(live)) == before


async def test_a_refused_or_replayed_admission_writes_no_audit(live: SqlLedger) -> None:
    refused = await live.admit(request("node_a", Resources(99, 0, 0)), audit=placed_event)
    assert refused.denial is not None
    first = await live.admit(request("node_b", request_id="job-9"))
    again = await live.admit(request("node_b", request_id="job-9"), audit=placed_event)
    assert again.replayed and first.placement == again.placement
    assert await live.events(kind="placed") == []


async def test_the_ledger_sink_skips_the_events_an_admission_committed(live: SqlLedger) -> None:
    written: list[Event] = []

    def audit(admission: Admission) -> list[Event]:
        written[:] = placed_event(admission)
        return written

    await live.admit(request("node_b"), audit=audit)
    later = Event("later", START, "p-2", "team", Level.INFO, {})
    await live.event_sink().emit([*written, later])  # as a fan-out sink delivers them again
    assert [r.event.kind for r in await live.events()] == ["placed", "later"]
    await live.event_sink().emit(written)  # skipped once only: a second delivery is recorded
    assert [r.event.kind for r in await live.events()] == ["placed", "later", "placed"]


async def test_the_sql_store_carries_out_the_admission_steps_of_the_port(live: SqlLedger) -> None:
    # The sequence is the domain's; the transaction only carries out its steps.
    async def steps(conn: Any) -> None:
        assert_implements(SqlSteps(conn, 0.0), AdmissionSteps)

    await live.store.read(steps, what="check the admission steps")
