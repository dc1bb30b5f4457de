"""Room reservations: what a drain's plan reserves, and how plans count room already reserved."""

from __future__ import annotations

from datetime import timedelta

from fleetgate.domain.capacity.relocation import Move, Verdict, plan
from fleetgate.domain.capacity.reservations import (
    Reservation,
    live,
    per_node,
    requests,
    unreserved,
    without_own,
)
from tests.unit.domain.capacity.test_relocation import FOUR, POLICY, T0, held, node, snapshot, times

LATER = T0 + timedelta(minutes=15)


def test_a_plan_that_fits_reserves_each_move_at_the_load_it_was_judged_at() -> None:
    source = node("a", times(FOUR, 3), 24)
    verdict = plan(snapshot(source, [node("b"), node("c")], 3), POLICY)
    made = requests(verdict, held("a", 3), LATER, POLICY)
    assert [(r.reservation.placement, r.reservation.node) for r in made] == list(verdict.targets)
    assert {r.reservation.owner for r in made} == {"a"}
    assert all(r.reservation.resources == FOUR and r.reservation.expires_at == LATER for r in made)
    assert {r.target_load for r in made} == {POLICY.target_load}  # the demand clause enforced
    waived = Verdict("a", 1, moves=(Move("a-0", "b", waived=True),))
    (one,) = requests(waived, held("a", 1), LATER, POLICY)
    assert one.target_load != POLICY.target_load  # the waiver's load, as the plan judged it


def test_a_plan_that_strands_reserves_nothing_and_a_placement_gone_is_skipped() -> None:
    stranded = Verdict("a", 2, moves=(Move("a-0", "b"),), stranded=("a-1",))
    assert requests(stranded, held("a", 2), LATER, POLICY) == ()
    fits = Verdict("a", 2, moves=(Move("a-0", "b"), Move("a-1", "c")))
    assert [r.reservation.placement for r in requests(fits, held("a", 1), LATER, POLICY)] == ["a-0"]


def test_a_node_plans_with_its_own_reserved_room_and_not_with_another_s() -> None:
    b = node("b", times(FOUR, 3))  # full: 2 of its 3 are a's reservations, 1 is x's
    mine = [Reservation(f"a-{i}", "b", FOUR, "a", LATER) for i in range(2)]
    theirs = [Reservation("x-0", "b", FOUR, "x", LATER)]
    (credited,) = without_own([b], [*mine, *theirs], "a")
    assert credited.used == FOUR
    source = node("a", times(FOUR, 2), 24)
    nodes = without_own([source, b], [*mine, *theirs], "a")
    verdict = plan(snapshot(source, list(nodes[1:]), 2), POLICY)
    assert verdict.fits and [m.target for m in verdict.moves] == ["b", "b"]
    assert not plan(snapshot(source, [b], 2), POLICY).fits  # without the credit: no room
    assert per_node([*mine, *theirs]) == {"b": times(FOUR, 3)}


def test_a_placement_already_reserved_for_is_not_counted_again_elsewhere() -> None:
    placements = held("x", 2)
    reserved = [
        Reservation("x-0", "b", FOUR, "x", LATER),
        Reservation("x-1", "b", FOUR, "y", LATER),
    ]
    # x-0's room is held for its move off x; x-1's reservation belongs to another owner.
    assert [p.id for p in unreserved(placements, reserved)] == ["x-1"]


def test_a_reservation_holds_its_room_until_it_expires() -> None:
    r = Reservation("a-0", "b", FOUR, "a", LATER)
    assert live(r, LATER - timedelta(seconds=1)) and not live(r, LATER)
