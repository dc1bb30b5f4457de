"""The walk: one enforced pass, then one waiver pass over the demand-only refusals only."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from fleetgate.domain.capacity.denials import Denial, DimensionDetail, Stage
from fleetgate.domain.capacity.guards import DEMAND_CLAUSE, node_guard
from fleetgate.domain.capacity.walk import WAIVED_TARGET_LOAD, Attempt, Walk, waiver_candidates

DEMAND = Denial(Stage.NODE, (DimensionDetail("demand", 6.0, 9.0, 0.6, True),))
CPUS = Denial(Stage.NODE, (DimensionDetail("cpus", 12, 12, 1, True),))
CLUSTER = Denial(Stage.CLUSTER, (DimensionDetail("cpus", 10, 10, 1, True),))


def drive(walk: Walk, outcomes: dict[tuple[str, bool], Denial | None]) -> list[Attempt]:
    tried = []
    while (attempt := walk.next_attempt()) is not None:
        tried.append(attempt)
        denial = outcomes.get((attempt.node, attempt.enforce_demand))
        if denial is None:
            walk.admitted(attempt.node)
        else:
            walk.refused(attempt.node, denial)
    return tried


def test_the_first_admitting_candidate_ends_the_walk() -> None:
    walk = Walk(["a", "b", "c"])
    tried = drive(walk, {("a", True): CPUS})
    assert [t.node for t in tried] == ["a", "b"] and walk.admitted_on == "b" and not walk.waived


def test_the_waiver_retries_only_demand_only_refusals_in_order() -> None:
    walk = Walk(["a", "b", "c", "d"])
    outcomes = {("a", True): DEMAND, ("b", True): CPUS, ("c", True): DEMAND, ("d", True): CLUSTER,
                ("a", False): CPUS}  # fmt: skip
    tried = drive(walk, outcomes)
    assert [(t.node, t.enforce_demand) for t in tried] == [
        ("a", True), ("b", True), ("c", True), ("d", True), ("a", False), ("c", False),
    ]  # fmt: skip
    assert [t.opens_waiver for t in tried] == [False] * 4 + [True, False]
    assert walk.waived and walk.admitted_on == "c"
    assert walk.denials["a"] is CPUS  # the waiver pass's refusal replaces the first


def test_no_waiver_when_nothing_was_demand_only() -> None:
    walk = Walk(["a", "b"])
    tried = drive(walk, {("a", True): CPUS, ("b", True): CLUSTER})
    assert len(tried) == 2 and not walk.waived and walk.admitted_on is None


def test_an_empty_walk_ends_at_once() -> None:
    walk = Walk([])
    assert walk.next_attempt() is None and walk.admitted_on is None


def test_the_waiver_pass_runs_once() -> None:
    walk = Walk(["a"])
    tried = drive(walk, {("a", True): DEMAND, ("a", False): DEMAND})
    assert len(tried) == 2 and walk.admitted_on is None


def test_waiver_candidates_and_duplicates() -> None:
    assert waiver_candidates(["a", "b"], {"a": CPUS, "b": DEMAND}) == ["b"]
    with pytest.raises(ValueError, match="candidates"):
        Walk(["a", "a"])


def test_a_lazy_order_is_drawn_one_candidate_per_try() -> None:
    pulled: list[str] = []

    def order() -> Iterator[str]:
        for name in ["a", "b", "c", "d"]:
            pulled.append(name)
            yield name

    walk = Walk(order())
    tried = drive(walk, {("a", True): CPUS})
    assert [t.node for t in tried] == ["a", "b"] and walk.admitted_on == "b"
    assert pulled == ["a", "b"] and walk.candidates == ["a", "b"]


def test_the_waiver_pass_revisits_the_drawn_order() -> None:
    walk = Walk(iter(["c", "a", "b"]))
    outcomes = {("c", True): DEMAND, ("a", True): CPUS, ("b", True): DEMAND,
                ("c", False): CPUS}  # fmt: skip
    tried = drive(walk, outcomes)
    assert [(t.node, t.enforce_demand) for t in tried] == [
        ("c", True), ("a", True), ("b", True), ("c", False), ("b", False),
    ]  # fmt: skip
    assert walk.candidates == ["c", "a", "b"] and walk.admitted_on == "b"


def test_a_lazy_order_that_repeats_a_node_is_an_error() -> None:
    walk = Walk(iter(["a", "a"]))
    assert walk.next_attempt() == Attempt("a", enforce_demand=True)
    walk.refused("a", CPUS)
    with pytest.raises(ValueError, match="twice"):
        walk.next_attempt()


def test_a_waived_attempt_admits_without_the_demand_budget() -> None:
    assert Attempt("a", enforce_demand=True).target_load(0.75) == 0.75
    assert Attempt("a", enforce_demand=False).target_load(0.75) == WAIVED_TARGET_LOAD
    assert DEMAND_CLAUSE not in node_guard(WAIVED_TARGET_LOAD).measures


def presuming(denials: dict[str, Denial]) -> Callable[[str], Denial | None]:
    return denials.get


def test_presumed_refusals_are_not_tried_and_a_recheck_confirming_them_ends_the_walk() -> None:
    walk = Walk(["a", "b", "c"], presuming({"a": CPUS, "c": CPUS}))
    tried = drive(walk, {("b", True): CPUS})
    assert [t.node for t in tried] == ["b"] and walk.needs_recheck
    walk.rechecked(presuming({"a": CPUS, "c": CPUS}))
    assert drive(walk, {}) == [] and not walk.needs_recheck and walk.admitted_on is None
    assert walk.denials == {"a": CPUS, "b": CPUS, "c": CPUS} and set(walk.presumed) == {"a", "c"}


def test_a_recheck_that_finds_room_tries_those_candidates_in_drawn_order() -> None:
    walk = Walk(["a", "b", "c"], presuming({"a": CPUS, "b": CPUS, "c": CPUS}))
    assert drive(walk, {}) == [] and walk.needs_recheck
    walk.rechecked(presuming({"b": CPUS}))  # "a" and "c" may have room now
    tried = drive(walk, {("a", True): CPUS})
    assert [(t.node, t.enforce_demand) for t in tried] == [("a", True), ("c", True)]
    assert walk.admitted_on == "c" and set(walk.presumed) == {"b"}


def test_a_walk_that_tried_nothing_tries_its_first_presumed_candidate() -> None:
    # Only the admission transaction can say whether the namespace side refuses first.
    walk = Walk(["a", "b"], presuming({"a": CPUS, "b": CPUS}))
    assert walk.next_attempt() is None and walk.needs_recheck
    walk.rechecked(None)
    tried = drive(walk, {("a", True): CLUSTER})
    assert [t.node for t in tried] == ["a"] and walk.attempts == 1
    assert walk.denials == {"a": CLUSTER, "b": CPUS} and not walk.needs_recheck


def test_presumed_refusals_are_never_waived_but_demand_only_ones_still_are() -> None:
    walk = Walk(["a", "b"], presuming({"a": CPUS}))
    tried = drive(walk, {("b", True): DEMAND})
    walk.rechecked(None)
    tried += drive(walk, {("b", True): DEMAND})
    assert [(t.node, t.enforce_demand) for t in tried] == [("b", True), ("b", False)]
    assert walk.waived and walk.admitted_on == "b"
