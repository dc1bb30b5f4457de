"""The carried census is a value: advancing one returns its successor and spends it."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.census import PoolCensus
from fleetgate.domain.rotation.machine import step
from fleetgate.domain.rotation.selection import Bucket, Census, classify, order
from tests.unit.domain.rotation.test_machine import DUE, LEAD, NOW, E, claim, policy, pool

RULES = policy().resolve(None)


def _advance(census: PoolCensus, obs: object, at: object = NOW) -> PoolCensus:
    return census.advanced(obs, RULES.selection, RULES.lead_time_base, at)  # type: ignore[arg-type]


def test_advancing_returns_the_successor_and_spends_the_census_it_was_advanced_from() -> None:
    obs = pool(claim("a", DUE), claim("b", timedelta(days=1)))
    first = _advance(PoolCensus(), obs)
    assert first.headcount.counts == {Bucket.ELIGIBLE: 1, Bucket.NOT_TRIGGERED: 1}
    second = _advance(first, obs, NOW + timedelta(minutes=1))
    assert second.headcount == first_census_of(obs, NOW + timedelta(minutes=1))
    with pytest.raises(ValueError, match="census: this one is empty or was advanced already"):
        first.candidate()
    with pytest.raises(ValueError, match="census"):
        PoolCensus().retry_count()


def test_the_step_hands_back_the_census_it_advanced_and_keeps_it_out_of_the_decision() -> None:
    obs = pool(claim("a", DUE))
    given = PoolCensus()
    carried = step(obs, [policy()], NOW, census=given)
    assert carried.census is not None and carried.census is not given
    assert carried.census.reclassified == 1
    assert carried == step(obs, [policy()], NOW)  # the census takes no part in equality
    again = step(obs, [policy()], NOW, census=carried.census)
    assert again.census is not None and again.census.reclassified == 1  # nothing changed
    started = step(obs, [policy()], NOW).census  # none given: the step starts one
    assert started is not None and started.reclassified == 1


def test_other_rules_or_an_earlier_now_start_the_tables_afresh() -> None:
    just = E - LEAD + timedelta(seconds=30)  # old enough at NOW, not a minute before
    obs = pool(claim("a", just), claim("b", timedelta(days=1)))
    census = _advance(PoolCensus(), obs)
    assert census.headcount.counts == {Bucket.ELIGIBLE: 1, Bucket.NOT_TRIGGERED: 1}
    earlier = NOW - timedelta(minutes=1)
    census = _advance(census, obs, earlier)  # time went backwards: "a" is not due then
    assert (
        census.headcount.counts == {Bucket.NOT_TRIGGERED: 2} == first_census_of(obs, earlier).counts
    )
    override = replace(RULES.selection, override=timedelta(hours=1))
    census = census.advanced(obs, override, RULES.lead_time_base, NOW)
    assert census.reclassified == 2  # every claim classified again, under the new rules
    assert census.headcount.counts == {Bucket.ELIGIBLE: 2}


def first_census_of(obs: object, at: object) -> Census:
    """The counts a fresh census gives for ``obs`` at ``at``."""
    return _advance(PoolCensus(), obs, at).headcount


def test_the_eligible_claims_come_in_selection_order_the_candidate_first() -> None:
    obs = pool(
        claim("late", DUE),
        claim("young", timedelta(days=1)),
        claim("early", DUE + timedelta(hours=2)),
        claim("mid", DUE + timedelta(hours=1)),
    )
    census = _advance(PoolCensus(), obs)
    views = [c.selection_view for c in obs.claims]
    eligible = [v for v in views if classify(v, NOW, RULES.selection) is Bucket.ELIGIBLE]
    expected = order(eligible, RULES.selection)
    assert [c.name for c in census.eligible()] == ["early", "mid", "late"]
    assert census.eligible() == expected
    assert census.candidate() == census.eligible()[0]


def test_the_surge_hosts_are_read_from_the_marks_or_walked_for_a_predicted_pool() -> None:
    marked = {ann.SURGE_FOR: "a"}
    base = pool(claim("a", DUE), claim("b", DUE), claim("c", DUE))
    obs = base.with_changes(
        dict(base.annotations), {}, {"c": replace(base.nodes[2], annotations=marked)}
    )
    census = _advance(PoolCensus(), obs)
    assert [n.name for n in census.surge_hosts("a", obs)] == ["c"]
    assert census.surge_hosts("b", obs) == []
    # A pool predicted from the observed one (the marks the census read are the observed
    # ones'): the nodes are walked, in observation order.
    predicted = obs.with_changes(
        dict(obs.annotations), {}, {"b": replace(obs.nodes[1], annotations=marked)}
    )
    assert [n.name for n in census.surge_hosts("a", predicted)] == ["b", "c"]


def test_the_due_hosts_follow_the_claims_that_fall_due_move_and_leave() -> None:
    """Kept as claims change, they are what a look at every triggered claim's node finds:
    each host once, sorted, none for a claim bound to no node."""
    young = timedelta(days=1)
    first = pool(
        claim("b", DUE),
        claim("a", DUE, node_name="h"),
        claim("c", DUE, node_name="h"),
        claim("d", DUE, node_name=None),
        claim("y", young),
    )
    census = _advance(PoolCensus(), first)
    assert census.due_hosts() == ["b", "h"]
    # "a" leaves ("c" still keeps its host due), "b" moves to another node.
    second = pool(claim("b", DUE, node_name="m"), claim("c", DUE, node_name="h"), claim("y", young))
    census = _advance(census, second)
    assert census.due_hosts() == ["h", "m"]
    # Time alone: "y" falls due once it is as old as the others were.
    census = _advance(census, second, NOW + DUE - young)
    assert census.due_hosts() == ["h", "m", "y"]
    assert _advance(PoolCensus(), second, NOW + DUE - young).due_hosts() == ["h", "m", "y"]
