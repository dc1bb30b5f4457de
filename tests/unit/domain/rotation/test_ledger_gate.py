"""Gate 9 in the pure step: the ledger's plans decide which node starts, and hold a drain (or a
surge-less start) whose placements would have nowhere to go, never the rest of the pool."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from fleetgate.domain.capacity.dimensions import Resources
from fleetgate.domain.capacity.relocation import Verdict
from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.actions import Announce, DeleteClaim
from fleetgate.domain.rotation.census import PoolCensus
from fleetgate.domain.rotation.cluster import PodView
from fleetgate.domain.rotation.constants import LONG_REQUEUE
from fleetgate.domain.rotation.gates import GateReason
from fleetgate.domain.rotation.ledger_gate import HELD, LedgerBlocked, ledger_hold, ways_out
from fleetgate.domain.rotation.machine import step
from fleetgate.domain.rotation.policy import ForcefulFallback
from tests.unit.domain.rotation.test_machine import (
    ANCHOR,
    NOW,
    E,
    claim,
    pending,
    policy,
    pool,
)

OLD, OLDER = E - timedelta(minutes=40), E - timedelta(minutes=30)  # both past the lead time
FITS = Verdict("b", 3)
SHORT = Verdict("a", 5, stranded=("p1", "p2"), missing=Resources(8, 0, 0))


def held(actions: tuple[object, ...]) -> list[Announce]:
    return [a for a in actions if isinstance(a, Announce) and a.reason == HELD]


def test_a_candidate_that_fits_or_holds_nothing_starts_as_before() -> None:
    obs = pool(claim("a", OLDER), claim("b", OLD))
    plain = step(obs, [policy()], NOW)
    assert plain.needs_ledger  # a start: a shell with a ledger asks it, then steps again
    for verdicts in ({}, {"a": Verdict("a", 2)}):
        judged = step(obs, [policy()], NOW, relocation=verdicts)
        assert judged.started == plain.started == "a" and not judged.needs_ledger
        assert judged.actions == plain.actions


def test_a_candidate_that_does_not_fit_now_is_skipped_for_the_next_one_that_fits() -> None:
    obs = pool(claim("a", OLDER), claim("b", OLD))
    for census in (None, PoolCensus()):
        result = step(obs, [policy()], NOW, census=census, relocation={"a": SHORT, "b": FITS})
        assert result.started == "b" and result.report.blocked is None
        (event,) = held(result.actions)
        assert event.subject == "a" and event.warning and event.related == ("Node", "a")
        assert result.report.anchor == "b" and result.report.ledger_hold is None


def test_when_none_fits_now_the_first_starts_on_its_surge_whose_drain_will_wait() -> None:
    """Issue 41 item 1: nothing stands in for the surge at the start. A surge rotation may
    bring the room, so it starts; its drain is judged once the surge is in the ledger."""
    obs = pool(claim("a", OLDER), claim("b", OLD))
    other = Verdict("b", 1, stranded=("q",), missing=Resources(0, 512, 0))
    result = step(obs, [policy()], NOW, relocation={"a": SHORT, "b": other})
    assert result.started == "a" and result.report.blocked is None
    assert not held(result.actions) and result.report.ledger_hold is None


def test_a_surgeless_start_that_does_not_fit_holds_the_pool_with_the_deadline() -> None:
    """The forceful fallback drains at once and brings nothing: it must fit now."""
    fallback = policy(forceful_fallback=ForcefulFallback(enabled=True))
    near = claim("a", E - timedelta(minutes=30))  # 30m left: less than a surge needs
    obs = pool(near)
    assert step(obs, [fallback], NOW).started == "a"  # blind, it would drain at once
    result = step(obs, [fallback], NOW, relocation={"a": SHORT})
    blocked = result.report.blocked
    assert isinstance(blocked, LedgerBlocked) and blocked.reason is GateReason.LEDGER_CAPACITY
    assert blocked.nodeclaim == "a" and blocked.verdict == SHORT and blocked.until is None
    assert result.report.reason == "ledgerCapacity" and result.started is None
    hold = result.report.ledger_hold
    assert hold is not None and not hold.draining and hold.time_left == timedelta(minutes=30)
    (event,) = held(result.actions)
    assert "at the start" in event.message and "in 30m" in event.message
    # Nothing in the cluster need change for the room to appear: looked at again on a timer.
    assert result.quiet_until == NOW + LONG_REQUEUE == result.requeue_at


def ready_surge(on: str = "new") -> PodView:
    return PodView(
        "fleetgate-system",
        "fleetgate-surge-old",
        node_name=on,
        phase="Running",
        labels={ann.SURGE_FOR: "old"},
    )


OLD_SHORT = Verdict("old", 3, stranded=("p",), missing=Resources(4, 0, 0))


JOINED = Verdict("new", 0)  # the surge's node is in the ledger (holding nothing yet)


def test_the_drain_waits_for_the_surge_to_join_the_ledger_without_a_warning() -> None:
    """Make-before-break for capacity: the surge is Ready, but the node sync has not brought
    it into the ledger yet; the drain is judged with it once it is there."""
    new = claim("new", timedelta(minutes=3))
    obs = pool(
        pending(NOW - timedelta(minutes=3)), new, annotations=ANCHOR, placeholders=(ready_surge(),)
    )
    result = step(obs, [policy()], NOW, relocation={"old": OLD_SHORT})
    assert DeleteClaim("old") not in result.actions and not held(result.actions)
    assert result.report.ledger_hold is None and result.quiet_until == NOW
    assert any(
        getattr(a, "message", "").startswith("surge node ready; waiting") for a in result.actions
    )


def test_the_drain_waits_until_the_old_nodes_plan_fits_the_ledger() -> None:
    """The surge has joined the ledger but brought too little: the old claim is not deleted,
    and the hold is announced with the node's deadline."""
    new = claim("new", timedelta(minutes=3))
    obs = pool(
        pending(NOW - timedelta(minutes=3)), new, annotations=ANCHOR, placeholders=(ready_surge(),)
    )
    blind = step(obs, [policy()], NOW)
    assert DeleteClaim("old") in blind.actions and blind.needs_ledger
    result = step(obs, [policy()], NOW, relocation={"old": OLD_SHORT, "new": JOINED})
    assert DeleteClaim("old") not in result.actions and not result.needs_ledger
    assert not any(
        a.patch.get(ann.CLAIM_STATE) == "draining" for a in result.actions if hasattr(a, "patch")
    )
    (event,) = held(result.actions)
    assert "before its drain" in event.message and event.subject == "old"
    hold = result.report.ledger_hold
    assert hold is not None and hold.draining and result.report.reason == "ledgerCapacity"
    assert ledger_hold(hold) == {
        "nodeclaim": "old",
        "node": "old",
        "placements": 3,
        "fits": False,
        "stranded": 1,
        "missing": {"cpus": 4, "memory_mb": 0, "disk_gb": 0},
        "phase": "drain",
        "expires_at": ann.format_timestamp(obs.claims[0].created_at + E),
        "expires_in_seconds": hold.time_left.total_seconds() if hold.time_left else None,
    }
    assert result.quiet_until == NOW  # the ledger, not the cluster, may bring the room
    # Once the plan fits (the surge joined the ledger), the drain begins.
    fits = step(obs, [policy()], NOW, relocation={"old": Verdict("old", 3), "new": JOINED})
    assert DeleteClaim("old") in fits.actions and fits.actions == blind.actions


def test_a_placeholder_on_a_node_that_existed_brings_nothing_and_the_drain_waits() -> None:
    """Karpenter launches nothing for a placeholder the scheduler could bind: its host is an
    old node, nothing new joins the ledger, and the plan without a surge decides."""
    neighbour = claim("neighbour", timedelta(days=1))
    obs = pool(
        pending(NOW - timedelta(minutes=3)),
        neighbour,
        annotations=ANCHOR,
        placeholders=(ready_surge("neighbour"),),
    )
    assert DeleteClaim("old") in step(obs, [policy()], NOW).actions  # blind: drains
    here = Verdict("neighbour", 2)  # in the ledger all along, with its own placements
    result = step(obs, [policy()], NOW, relocation={"old": OLD_SHORT, "neighbour": here})
    assert DeleteClaim("old") not in result.actions and held(result.actions)


def test_a_held_drain_still_fails_at_ready_timeout_and_keeps_a_surge_holding_placements() -> None:
    started = NOW - timedelta(minutes=16)
    surge = claim("surge", timedelta(minutes=15))
    placeholder = ready_surge("surge")
    obs = pool(pending(started), surge, annotations=ANCHOR, placeholders=(placeholder,))
    obs = replace(obs, pods=tuple(p for p in obs.pods if p.node_name != "surge"))  # idle surge
    blind = step(obs, [policy()], NOW)
    assert DeleteClaim("surge") in blind.actions and blind.needs_ledger
    # The surge took ledger placements while the drain waited, and they have nowhere to go.
    surge_short = Verdict("surge", 2, stranded=("x",), missing=Resources(2, 0, 0))
    kept = step(obs, [policy()], NOW, relocation={"surge": surge_short})
    assert DeleteClaim("surge") not in kept.actions
    assert any(a.reason == "RotationFailed" for a in kept.actions if isinstance(a, Announce))
    # Placements that could move do not keep it.
    assert (
        DeleteClaim("surge")
        in step(obs, [policy()], NOW, relocation={"surge": Verdict("surge", 2)}).actions
    )


def test_an_earlier_gate_is_reported_before_the_ledger() -> None:
    obs = pool(claim("a", OLDER), annotations={ann.FREEZE: "2099-01-01T00:00:00Z"})
    result = step(obs, [policy()], NOW, relocation={"a": SHORT})
    assert result.report.reason == "frozen" and not held(result.actions)


def test_the_message_says_what_is_missing_and_the_ways_out() -> None:
    text = ways_out(SHORT)
    assert "2 of 5" in text and "cpus 8" in text
    for way in ("raise the pool's limits", "shrink a capacity claim", "add a node"):
        assert way in text
    split = ways_out(Verdict("a", 2, stranded=("p",)))
    assert "split across nodes" in split
