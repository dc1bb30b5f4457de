"""Room reservations against the real databases: a reserve racing admissions, moves and the
reconciler never over-commits a node, is all or none, and leaves counters the pass finds exact."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.model import AdmitRequest, MoveRequest, NodeSpec
from fleetgate.domain.capacity.reservations import Reservation, ReservationRequest
from tests.invariants import check_ledger

FOUR = Resources(4, 512, 5)
ROUNDS = 4


def _held(pid: str, node: str, clock: VirtualClock) -> ReservationRequest:
    expires = clock.now() + timedelta(minutes=15)
    return ReservationRequest(
        Reservation(pid, node, FOUR, "a", expires), DemandPolicy().target_load
    )


async def _placed(ledger: SqlLedger, node: str) -> str:
    made = await ledger.admit(AdmitRequest("ns", node, FOUR))
    assert made.placement is not None, made.denial
    return made.placement.id


async def test_a_reserve_racing_admissions_is_all_or_none_and_never_over_commits(
    ledger: SqlLedger, clock: VirtualClock
) -> None:
    await ledger.add_node(NodeSpec("a", Capacity(8, 8192, 100)))
    await ledger.add_node(NodeSpec("b", Capacity(4, 8192, 100)))  # 12 vCPUs: three of FOUR
    p1, p2 = await _placed(ledger, "a"), await _placed(ledger, "a")
    for _ in range(ROUNDS):
        reserve = ledger.reserve("a", [_held(p1, "b", clock), _held(p2, "b", clock)])
        admits = [ledger.admit(AdmitRequest("ns", "b", FOUR)) for _ in range(3)]
        reserved, *admitted = await asyncio.gather(reserve, *admits)
        taken = [a.placement.id for a in admitted if a.placement is not None]
        held = await ledger.reservations("a")
        if reserved.made:
            assert len(held) == 2 and len(taken) <= 1
        else:
            assert held == [] and len(taken) >= 2
        await check_ledger(ledger)
        assert (await ledger.reconcile()).summary.clean
        for pid in taken:
            await ledger.release(pid)
        await ledger.end_reservations("a")
    assert (await ledger.node("b")).used == Resources()  # type: ignore[union-attr]


async def test_moves_reserves_and_the_reconciler_together_leave_exact_counters(
    ledger: SqlLedger, clock: VirtualClock
) -> None:
    for name in ("a", "b", "c"):
        await ledger.add_node(NodeSpec(name, Capacity(8, 8192, 100)))
    ids = {await _placed(ledger, "a") for _ in range(4)}
    p1, p2, p3, p4 = sorted(ids)
    first = [_held(p1, "b", clock), _held(p2, "c", clock), _held(p3, "b", clock)]
    assert (await ledger.reserve("a", first)).made
    again = [_held(p1, "c", clock), _held(p2, "b", clock), _held(p4, "c", clock)]
    await asyncio.gather(
        ledger.move(MoveRequest(p1, "b")),  # into its reservation, or past a replaced one
        ledger.move(MoveRequest(p3, "c")),  # elsewhere: b's room handed back
        ledger.reserve("a", again),
        ledger.reconcile(),
    )
    await check_ledger(ledger, ids)
    assert (await ledger.reconcile()).summary.clean
    for r in await ledger.reservations():
        placement = await ledger.placement(r.placement)
        assert placement is not None and placement.node == "a"  # the rest were ended
