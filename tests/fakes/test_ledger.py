"""The ledger contract, held by the in-memory ledger and the SQL ledger alike.

Every test here runs twice: on ``tests.fakes.ledger.InMemoryLedger`` and on the SQL ledger over
the database under test (that half is marked ``backend``, so CI runs it on MariaDB and
PostgreSQL too). A behaviour the service tests rely on from the fake is asserted here against
the real thing, so the fake cannot drift from it. Concurrency and the SQL guards' own semantics
stay in tests/adapters/sql, on every real backend.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import timedelta

import pytest

from fleetgate.adapters.clock import VirtualClock
from fleetgate.domain.capacity.claims import (
    ClaimEnforcement,
    ClaimRequest,
    ClaimState,
    ClaimUpdate,
    RefusalReason,
)
from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.capacity.denials import Stage
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.errors import (
    NodeBusy,
    NodeExists,
    NodeNotFound,
    PlacementNotFound,
)
from fleetgate.domain.capacity.model import AdmitRequest, MoveRequest, NodeMetrics, NodeSpec
from fleetgate.domain.capacity.reservations import Reservation, ReservationRequest
from fleetgate.domain.events import Event, Level
from fleetgate.domain.ports import (
    Admissions,
    AdmissionSteps,
    AuditTrail,
    CapacityLedger,
    ClaimBook,
    ClaimReader,
    InventoryReader,
    LedgerLifecycle,
    LedgerReconciler,
    NodeInventory,
    PlacementReader,
    RoomReservations,
    TokenStore,
)
from fleetgate.domain.tokens import digest
from tests.fakes.ledger import InMemoryLedger, _Steps
from tests.ledgers import START, open_ledger
from tests.ports import assert_implements

#: 4 threads, 4 GiB, 40 GB: with the default overcommit a node admits 12 vCPUs.
NODE = Capacity(4, 4096, 40)
VM = Resources(2, 1024, 10)
ROLES = (
    LedgerLifecycle,
    InventoryReader,
    NodeInventory,
    PlacementReader,
    Admissions,
    RoomReservations,
    ClaimReader,
    ClaimBook,
    LedgerReconciler,
    AuditTrail,
    CapacityLedger,
    TokenStore,
)

Opener = Callable[..., AbstractAsyncContextManager[CapacityLedger]]


@pytest.fixture(params=["memory", pytest.param("sql", marks=pytest.mark.backend)])
def opener(request: pytest.FixtureRequest, clock: VirtualClock) -> Opener:
    """Opens a started, empty ledger of the kind under test: ``opener(enforcement=...)``."""

    @asynccontextmanager
    async def memory(enforcement: str = "advisory") -> AsyncIterator[CapacityLedger]:
        ledger = InMemoryLedger(clock, enforcement=ClaimEnforcement(enforcement))
        await ledger.start()
        try:
            yield ledger
        finally:
            await ledger.close()

    if request.param == "memory":
        return memory
    # Resolved here, outside any event loop: the session's database is created synchronously.
    backend = request.getfixturevalue("backend")

    @asynccontextmanager
    async def sql(enforcement: str = "advisory") -> AsyncIterator[CapacityLedger]:
        async with open_ledger(backend, clock, enforcement) as opened:
            yield opened

    return sql


@pytest.fixture
async def ledger(opener: Opener) -> AsyncIterator[CapacityLedger]:
    """An advisory-claims ledger of the kind under test."""
    async with opener() as opened:
        yield opened


def events_of(kind: str) -> Callable[[object], list[Event]]:
    """An audit that reports any result as one event of ``kind`` (with a bit of data)."""
    return lambda _: [Event(kind, START, subject=kind, data={"n": 1})]


async def kinds(ledger: CapacityLedger) -> list[str]:
    return [r.event.kind for r in await ledger.events()]


# --- the ports ------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ROLES, ids=lambda r: r.__name__)
async def test_each_role_is_implemented_by_name_and_signature(
    ledger: CapacityLedger, role: type
) -> None:
    assert_implements(ledger, role)


def test_the_fake_carries_out_the_admission_steps_of_the_port() -> None:
    # A store of the domain's steps, not an admission of its own.
    assert_implements(_Steps(InMemoryLedger(VirtualClock(START))), AdmissionSteps)


# --- nodes ----------------------------------------------------------------------------------


async def test_a_node_joins_with_derived_limits_and_the_totals_follow_every_change(
    ledger: CapacityLedger,
) -> None:
    added = await ledger.add_node(NodeSpec("a", NODE, "p", {"rack": "r1"}))
    assert (added.pool, added.labels, added.schedulable) == ("p", {"rack": "r1"}, True)
    assert added.limits == Resources(12, 4096, 40) and added.used == Resources()
    await ledger.add_node(NodeSpec("b", NODE))
    assert (await ledger.cluster()).total == Resources(24, 8192, 80)
    with pytest.raises(NodeExists):
        await ledger.add_node(NodeSpec("a", Capacity(1, 1, 1)))
    assert (await ledger.node("a")) == added
    await ledger.admit(AdmitRequest("ns", "a", VM))
    grown = await ledger.update_node(NodeSpec("a", Capacity(8, 4096, 40), "q"))
    assert grown.limits.cpus == 24 and grown.used == VM and grown.pool == "q" and not grown.labels
    assert (await ledger.cluster()).total.cpus == 36
    with pytest.raises(NodeBusy):
        await ledger.remove_node("a")
    await ledger.remove_node("b")
    assert [n.name for n in await ledger.nodes()] == ["a"]
    assert (await ledger.cluster()).total == grown.limits
    for missing in (ledger.remove_node, ledger.cordon, ledger.uncordon):
        with pytest.raises(NodeNotFound):
            await missing("ghost")
    with pytest.raises(NodeNotFound):
        await ledger.update_node(NodeSpec("ghost", NODE))


async def test_cordon_metrics_and_pages_of_nodes(ledger: CapacityLedger) -> None:
    for name in ("c", "a", "b"):
        await ledger.add_node(NodeSpec(name, NODE))
    assert not (await ledger.cordon("b")).schedulable
    assert (await ledger.uncordon("b")).schedulable
    published = await ledger.publish_metrics("a", NodeMetrics(cpu_load_1=1.5, cpu_schedulable=4))
    assert published.metrics == NodeMetrics(1.5, 4) and published.metrics_at is not None
    assert [n.name for n in await ledger.nodes()] == ["a", "b", "c"]
    assert [n.name for n in await ledger.nodes(limit=2)] == ["a", "b"]
    assert [n.name for n in await ledger.nodes(after="a", limit=1)] == ["b"]
    assert await ledger.node("ghost") is None
    with pytest.raises(NodeNotFound):
        await ledger.publish_metrics("ghost", NodeMetrics())


# --- admissions -----------------------------------------------------------------------------


async def test_an_admission_charges_the_cluster_and_the_node_and_replays_its_request_id(
    ledger: CapacityLedger,
) -> None:
    await ledger.add_node(NodeSpec("a", NODE))
    first = await ledger.admit(AdmitRequest("ns", "a", VM, demand=1.2, request_id="r1"))
    assert first.placement is not None and not first.replayed and first.claim_id is None
    assert first.node is not None and first.node.used == VM and first.node.expected_demand == 1.2
    again = await ledger.admit(AdmitRequest("ns", "a", VM, demand=1.2, request_id="r1"))
    assert again.replayed and again.placement == first.placement
    assert (await ledger.node("a")).used == VM  # type: ignore[union-attr]
    assert (await ledger.cluster()).unclaimed_used == VM
    assert await ledger.placement_by_request("ns", "r1") == first.placement
    assert await ledger.placement_by_request("other", "r1") is None
    assert await ledger.placements() == [first.placement]
    with pytest.raises(NodeNotFound):
        await ledger.admit(AdmitRequest("ns", "ghost", VM))


async def test_a_refusal_is_a_result_that_changes_nothing(ledger: CapacityLedger) -> None:
    await ledger.add_node(NodeSpec("a", NODE))
    await ledger.publish_metrics("a", NodeMetrics(cpu_load_1=3.5, cpu_schedulable=4))
    before = await ledger.node("a")
    audit = events_of("placed")
    too_big = await ledger.admit(AdmitRequest("ns", "a", Resources(13, 1, 1)), audit=audit)
    assert too_big.denial is not None and too_big.denial.stage is Stage.CLUSTER
    assert too_big.denial.exceeded == {"cpus"}
    busy = await ledger.admit(AdmitRequest("ns", "a", VM, target_load=0.75), audit=audit)
    assert busy.denial is not None and busy.denial.stage is Stage.NODE and busy.denial.demand_only
    await ledger.cordon("a")
    cordoned = await ledger.admit(AdmitRequest("ns", "a", VM), audit=audit)
    assert cordoned.denial is not None and cordoned.denial.cordoned
    assert await ledger.placements() == [] and await ledger.events() == []
    after = await ledger.node("a")
    assert after is not None and before is not None and after.used == before.used
    assert (await ledger.cluster()).unclaimed_used == Resources()


async def test_an_unenforced_admission_records_what_it_bypassed(ledger: CapacityLedger) -> None:
    await ledger.add_node(NodeSpec("a", NODE))
    out = await ledger.admit(AdmitRequest("ns", "a", Resources(13, 1, 1), enforce=False))
    assert out.placement is not None
    assert [d.stage for d in out.bypassed] == [Stage.CLUSTER, Stage.NODE]
    assert (await ledger.node("a")).used.cpus == 13  # type: ignore[union-attr]


async def test_release_credits_floored_and_decayed_and_is_idempotent(
    ledger: CapacityLedger, clock: VirtualClock
) -> None:
    await ledger.add_node(NodeSpec("a", NODE))
    out = await ledger.admit(AdmitRequest("ns", "a", VM, demand=1.2))
    assert out.placement is not None
    clock.advance(timedelta(seconds=300))  # half the default 600 s decay
    assert not (await ledger.release(out.placement.id, namespace="other")).released
    released = await ledger.release(out.placement.id, audit=events_of("released"))
    assert released.released and released.placement == out.placement and not released.clamped
    assert released.demand_credit == pytest.approx(0.6)
    node = await ledger.node("a")
    assert node is not None and node.used == Resources()
    assert node.expected_demand == pytest.approx(0.6)
    assert (await ledger.cluster()).unclaimed_used == Resources()
    assert not (await ledger.release(out.placement.id)).released
    assert await ledger.placement(out.placement.id) is None
    assert await kinds(ledger) == ["released"]


async def test_a_move_goes_under_the_target_guard_or_not_at_all(ledger: CapacityLedger) -> None:
    await ledger.add_node(NodeSpec("a", NODE))
    await ledger.add_node(NodeSpec("b", Capacity(1, 4096, 40)))  # 3 vCPUs
    out = await ledger.admit(AdmitRequest("ns", "a", Resources(4, 1, 1)))
    assert out.placement is not None
    pid = out.placement.id
    refused = await ledger.move(MoveRequest(pid, "b"), audit=events_of("moved"))
    assert refused.denial is not None and refused.denial.exceeded == {"cpus"}
    assert (await ledger.placement(pid)) == out.placement and await ledger.events() == []
    await ledger.add_node(NodeSpec("c", NODE))
    moved = await ledger.move(MoveRequest(pid, "c", demand=0.5), audit=events_of("moved"))
    assert moved.placement is not None and moved.placement.node == "c"
    assert moved.node is not None and moved.node.used.cpus == 4
    assert (await ledger.node("a")).used == Resources()  # type: ignore[union-attr]
    stay = await ledger.move(MoveRequest(pid, "c"))
    assert stay.placement is not None and stay.placement.node == "c"
    assert [p.node for p in await ledger.placements(node="c")] == ["c"]
    with pytest.raises(PlacementNotFound):
        await ledger.move(MoveRequest(pid, "a", namespace="other"))
    with pytest.raises(NodeNotFound):
        await ledger.move(MoveRequest(pid, "ghost"))
    assert await kinds(ledger) == ["moved"]


async def test_placements_are_listed_by_namespace_and_node_and_paged_by_id(
    ledger: CapacityLedger,
) -> None:
    await ledger.add_node(NodeSpec("a", NODE))
    await ledger.add_node(NodeSpec("b", NODE))
    for ns, node in (("x", "a"), ("y", "a"), ("x", "b")):
        await ledger.admit(AdmitRequest(ns, node, Resources(1, 1, 1)))
    every = await ledger.placements()
    assert {(p.namespace, p.node) for p in await ledger.placements("x")} == {("x", "a"), ("x", "b")}
    assert [p.namespace for p in await ledger.placements("x", node="b")] == ["x"]
    ids = sorted(p.id for p in every)
    assert [p.id for p in await ledger.placements(limit=2)] == ids[:2]
    assert [p.id for p in await ledger.placements(after=ids[0])] == ids[1:]


# --- claims ---------------------------------------------------------------------------------


async def test_a_claim_takes_over_its_namespace_s_usage_and_is_charged(
    ledger: CapacityLedger,
) -> None:
    await ledger.add_node(NodeSpec("a", NODE))
    before = await ledger.admit(AdmitRequest("ns", "a", VM))
    made = await ledger.create_claim(ClaimRequest("ns", Resources(4, 4096, 40), 60))
    assert made.ok and made.claim is not None and made.claim.used == VM
    assert (await ledger.placement(before.placement.id)).claim_id == made.claim.id  # type: ignore[union-attr]
    cluster = await ledger.cluster()
    assert cluster.claimed == Resources(4, 4096, 40) and cluster.unclaimed_used == Resources()
    again = await ledger.create_claim(ClaimRequest("ns", Resources(1, 1, 1), 60))
    assert again.refusal is not None and again.refusal.reason is RefusalReason.EXISTS
    over = await ledger.admit(AdmitRequest("ns", "a", Resources(3, 1, 1)))  # 5 of 4: advisory
    assert over.claim_id == made.claim.id and [d.dimension for d in over.claim_over_limit] == [
        "cpus"
    ]
    assert (await ledger.cluster()).unclaimed_used == Resources(1, 0, 0)  # the overage
    claim = await ledger.claim(made.claim.id)
    assert claim is not None and claim.used == Resources(5, 1025, 11)
    assert over.placement is not None
    await ledger.release(over.placement.id)
    assert (await ledger.cluster()).unclaimed_used == Resources()
    too_big = await ledger.create_claim(ClaimRequest("other", Resources(100, 1, 1), 60))
    assert too_big.refusal is not None and too_big.refusal.reason is RefusalReason.CAPACITY


async def test_a_hard_claim_refuses_past_its_limit(opener: Opener) -> None:
    async with opener(enforcement="hard") as ledger:
        await ledger.add_node(NodeSpec("a", NODE))
        made = await ledger.create_claim(ClaimRequest("ns", Resources(2, 4096, 40), 60))
        assert made.claim is not None
        assert (await ledger.admit(AdmitRequest("ns", "a", VM))).placement is not None
        refused = await ledger.admit(AdmitRequest("ns", "a", VM))
        assert refused.denial is not None and refused.denial.stage is Stage.CLAIM
        forced = await ledger.admit(AdmitRequest("ns", "a", VM, enforce=False))
        assert [d.stage for d in forced.bypassed] == [Stage.CLAIM]


async def test_claim_updates_deletes_and_expiry(
    ledger: CapacityLedger, clock: VirtualClock
) -> None:
    await ledger.add_node(NodeSpec("a", NODE))
    await ledger.admit(AdmitRequest("ns", "a", VM))
    made = await ledger.create_claim(ClaimRequest("ns", Resources(4, 2048, 20), 60))
    assert made.claim is not None
    cid = made.claim.id
    grown = await ledger.update_claim(cid, ClaimUpdate(limit_cpus=6, expires_in_seconds=120))
    assert grown.ok and grown.claim is not None and grown.claim.limit.cpus == 6
    assert (await ledger.cluster()).claimed.cpus == 6
    below = await ledger.update_claim(cid, ClaimUpdate(limit_cpus=1))
    assert below.refusal is not None and below.refusal.reason is RefusalReason.BELOW_USAGE
    absent = await ledger.update_claim(cid, ClaimUpdate(limit_cpus=5), namespace="other")
    assert absent.refusal is not None and absent.refusal.reason is RefusalReason.NOT_FOUND
    assert [c.id for c in await ledger.claims("ns")] == [cid] and await ledger.claims("x") == []
    clock.advance(timedelta(seconds=120))
    seen = await ledger.claim(cid)
    assert seen is not None and seen.state is ClaimState.EXPIRED
    late = await ledger.update_claim(cid, ClaimUpdate(limit_cpus=5), audit=events_of("expired"))
    assert late.refusal is not None and late.refusal.reason is RefusalReason.NOT_ACTIVE
    assert late.expired is not None and late.expired.id == cid
    assert await kinds(ledger) == ["expired"]  # the expiry it stored committed with its event
    cluster = await ledger.cluster()
    assert cluster.claimed == Resources() and cluster.unclaimed_used == VM
    gone = await ledger.delete_claim(cid)
    assert gone.deleted and gone.returned == Resources()  # its usage went back at expiry
    assert not (await ledger.delete_claim(cid)).deleted
    renewed = await ledger.create_claim(ClaimRequest("ns", Resources(4, 2048, 20), 60))
    assert renewed.claim is not None
    deleted = await ledger.delete_claim(renewed.claim.id, namespace="ns")
    assert deleted.deleted and deleted.returned == VM
    assert (await ledger.cluster()).unclaimed_used == VM


async def test_a_create_retires_the_namespace_s_due_claim(
    ledger: CapacityLedger, clock: VirtualClock
) -> None:
    await ledger.add_node(NodeSpec("a", NODE))
    first = await ledger.create_claim(ClaimRequest("ns", Resources(1, 0, 0), 60))
    assert first.claim is not None
    clock.advance(timedelta(seconds=60))
    second = await ledger.create_claim(ClaimRequest("ns", Resources(2, 0, 0), 60))
    assert second.ok and second.expired is not None and second.expired.id == first.claim.id
    assert second.expired.state is ClaimState.EXPIRED
    assert (await ledger.cluster()).claimed == Resources(2, 0, 0)


# --- the reconcile pass ---------------------------------------------------------------------


async def test_a_pass_after_honest_writes_is_clean_and_expires_what_is_due(
    ledger: CapacityLedger, clock: VirtualClock
) -> None:
    await ledger.add_node(NodeSpec("a", NODE))
    await ledger.admit(AdmitRequest("ns", "a", VM, demand=1.2))
    await ledger.admit(AdmitRequest("other", "a", VM))
    made = await ledger.create_claim(ClaimRequest("ns", Resources(4, 2048, 20), 450))
    assert made.claim is not None
    clean = await ledger.reconcile(audit=events_of("reconciled"))
    assert clean.summary.clean and clean.reattributed == 0
    clock.advance(timedelta(seconds=300))
    decayed = await ledger.reconcile()
    assert [n.expected_demand for n in decayed.reconciliation.nodes] == [pytest.approx(0.6)]
    assert decayed.reconciliation.expired == ()
    clock.advance(timedelta(seconds=300))
    swept = await ledger.reconcile()
    assert [c.id for c in swept.reconciliation.expired] == [made.claim.id]
    cluster = await ledger.cluster()
    assert cluster.claimed == Resources() and cluster.unclaimed_used == VM.plus(VM)
    assert (await ledger.node("a")).expected_demand == 0.0  # type: ignore[union-attr]
    assert await kinds(ledger) == ["reconciled"]


# --- room reservations ------------------------------------------------------------------------

FOUR = Resources(4, 512, 5)


async def _placed(ledger: CapacityLedger, node: str, count: int) -> list[str]:
    ids = []
    for _ in range(count):
        made = await ledger.admit(AdmitRequest("ns", node, FOUR))
        assert made.placement is not None, made.denial
        ids.append(made.placement.id)
    return ids


def _held(pid: str, node: str, clock: VirtualClock, seconds: int = 600) -> ReservationRequest:
    """``pid``'s move off node ``a`` to ``node``, held ``seconds`` from now."""
    expires = clock.now() + timedelta(seconds=seconds)
    return ReservationRequest(
        Reservation(pid, node, FOUR, "a", expires), DemandPolicy().target_load
    )


async def test_reserved_room_is_taken_for_admissions_and_the_move_into_it_charges_nothing_more(
    ledger: CapacityLedger, clock: VirtualClock
) -> None:
    await ledger.add_node(NodeSpec("a", NODE))
    await ledger.add_node(NodeSpec("b", NODE))  # 12 vCPUs
    p1, p2, p3 = await _placed(ledger, "a", 3)
    before = await ledger.cluster()
    made = await ledger.reserve("a", [_held(p1, "b", clock), _held(p2, "b", clock)])
    assert made.made and [r.placement for r in await ledger.reservations("a")] == sorted([p1, p2])
    assert (await ledger.node("b")).used == FOUR.plus(FOUR)  # type: ignore[union-attr]
    assert await ledger.cluster() == before  # the placements count there once already
    refused = await ledger.admit(AdmitRequest("ns", "b", Resources(8, 512, 5)))
    assert refused.denial is not None and refused.denial.exceeded == {"cpus"}
    assert (await ledger.admit(AdmitRequest("ns", "b", FOUR))).placement is not None  # b full
    # All or none: a third reservation does not fit, so the owner keeps the two it held.
    more = await ledger.reserve("a", [_held(p, "b", clock) for p in (p1, p2, p3)])
    assert not more.made and more.refused is not None and more.refused.placement == p3
    assert len(await ledger.reservations("a")) == 2
    assert (await ledger.node("b")).used.cpus == 12  # type: ignore[union-attr]
    gone = await ledger.reserve("a", [_held(p3, "ghost", clock)])  # a node gone since the plan
    assert not gone.made and gone.refused is not None and gone.refused.node == "ghost"
    assert len(await ledger.reservations("a")) == 2
    moved = await ledger.move(MoveRequest(p1, "b", demand=0.5))
    assert moved.denial is None and moved.node is not None and moved.node.used.cpus == 12
    assert moved.node.expected_demand == pytest.approx(0.5)
    assert (await ledger.node("a")).used == FOUR.plus(FOUR)  # type: ignore[union-attr]
    assert [r.placement for r in await ledger.reservations()] == [p2]
    assert await ledger.end_reservations("a") == 1 and await ledger.reservations() == []
    assert (await ledger.node("b")).used.cpus == 8  # type: ignore[union-attr]
    assert (await ledger.reconcile()).summary.clean


async def test_a_reservation_ends_with_a_move_elsewhere_its_placement_s_release_or_its_expiry(
    ledger: CapacityLedger, clock: VirtualClock
) -> None:
    for name in ("a", "b", "c"):
        await ledger.add_node(NodeSpec(name, NODE))
    p1, p2, p3 = await _placed(ledger, "a", 3)
    reserved = [_held(p1, "b", clock, 60), _held(p2, "b", clock), _held(p3, "b", clock)]
    assert (await ledger.reserve("a", reserved)).made
    assert (await ledger.move(MoveRequest(p3, "c"))).denial is None  # b's room handed back
    assert (await ledger.node("b")).used.cpus == 8  # type: ignore[union-attr]
    assert (await ledger.release(p2)).released  # its reservation is left for the reconciler
    assert (await ledger.node("b")).used.cpus == 8  # type: ignore[union-attr]
    swept = await ledger.reconcile()
    assert swept.summary.clean, swept.summary
    assert [r.placement for r in await ledger.reservations()] == [p1]
    assert (await ledger.node("b")).used == FOUR  # type: ignore[union-attr]
    clock.advance(timedelta(seconds=60))
    expired = await ledger.reconcile()
    assert expired.summary.clean and await ledger.reservations() == []
    assert (await ledger.node("b")).used == Resources()  # type: ignore[union-attr]
    assert (await ledger.node("a")).used == FOUR  # type: ignore[union-attr]


# --- the audit trail ------------------------------------------------------------------------


class Boom(Exception):
    """An audit that fails."""


async def test_a_change_whose_audit_fails_is_not_made(ledger: CapacityLedger) -> None:
    def fails(_: object) -> list[Event]:
        raise Boom

    with pytest.raises(Boom):
        await ledger.add_node(NodeSpec("a", NODE), audit=fails)
    assert await ledger.nodes() == [] and (await ledger.cluster()).total == Resources()


async def test_committed_events_reach_the_sink_once_and_reads_filter_them(
    ledger: CapacityLedger,
) -> None:
    await ledger.add_node(NodeSpec("a", NODE))
    joined = Event("joined", START, subject="a", data={"at": START})
    placed = Event("placed", START, subject="p", namespace="ns", level=Level.WARNING)
    await ledger.cordon("a", audit=lambda _: [joined])
    await ledger.event_sink().emit([joined, placed])  # joined is in the trail already
    await ledger.record_events([Event("noted", START, namespace="ns")])
    every = await ledger.events()
    assert [r.event.kind for r in every] == ["joined", "placed", "noted"]
    assert every[0].event.data == {"at": START.isoformat()}  # stored as JSON
    assert every[1].event == placed
    ids = [r.id for r in every]
    assert ids == sorted(ids)
    assert [r.event.kind for r in await ledger.events(namespace="ns")] == ["placed", "noted"]
    assert [r.event.kind for r in await ledger.events(subject="a")] == ["joined"]
    assert [r.event.kind for r in await ledger.events(kind="noted")] == ["noted"]
    assert [r.id for r in await ledger.events(after_id=ids[0])] == ids[1:]
    assert [r.id for r in await ledger.events(before_id=ids[2])] == ids[:2]
    assert [r.id for r in await ledger.events(newest_first=True, limit=2)] == ids[:0:-1]
    with pytest.raises(ValueError, match="limit"):
        await ledger.events(limit=0)


# --- API tokens -----------------------------------------------------------------------------


async def test_tokens_by_digest_listed_and_revoked_once(
    ledger: CapacityLedger, clock: VirtualClock
) -> None:
    assert isinstance(ledger, TokenStore)
    made = await ledger.create_token("ns", digest("fgt_a"), clock.now())
    assert made.active and await ledger.token_by_digest(digest("fgt_a")) == made
    assert await ledger.token_by_digest(digest("fgt_b")) is None
    assert not await ledger.revoke_token("other", made.id, clock.now())
    assert await ledger.revoke_token("ns", made.id, clock.now(), audit=lambda ok: [])
    assert not await ledger.revoke_token("ns", made.id, clock.now())
    (listed,) = await ledger.list_tokens("ns")
    assert listed.id == made.id and not listed.active
    with pytest.raises(ValueError, match="token_digest"):
        await ledger.create_token("ns", "short", clock.now())
