"""Gate 9 in the pure step: the ledger's verdicts hold a node, never the rest of the pool."""

from __future__ import annotations

from datetime import timedelta

from fleetgate.domain.capacity.dimensions import Resources
from fleetgate.domain.capacity.relocation import Verdict
from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.actions import Announce
from fleetgate.domain.rotation.census import PoolCensus
from fleetgate.domain.rotation.constants import LONG_REQUEUE
from fleetgate.domain.rotation.gates import GateReason
from fleetgate.domain.rotation.ledger_gate import HELD, LedgerBlocked, ways_out
from fleetgate.domain.rotation.machine import step
from tests.unit.domain.rotation.test_machine import NOW, E, claim, policy, pool

OLD, OLDER = E - timedelta(minutes=40), E - timedelta(minutes=30)  # both past the lead time
FITS = Verdict("b", 3)
SHORT = Verdict("a", 5, stranded=("p1", "p2"), missing=Resources(8, 0, 0))


def held(actions: tuple[object, ...]) -> list[Announce]:
    return [a for a in actions if isinstance(a, Announce) and a.reason == HELD]


def test_a_candidate_that_fits_or_holds_nothing_starts_as_before() -> None:
    obs = pool(claim("a", OLDER), claim("b", OLD))
    plain = step(obs, [policy()], NOW)
    for verdicts in (None, {}, {"a": Verdict("a", 2)}):
        judged = step(obs, [policy()], NOW, relocation=verdicts)
        assert judged.started == plain.started == "a"
        assert judged.actions == plain.actions


def test_a_held_candidate_is_skipped_for_the_next_one_that_fits() -> None:
    obs = pool(claim("a", OLDER), claim("b", OLD))
    for census in (None, PoolCensus()):
        result = step(obs, [policy()], NOW, census=census, relocation={"a": SHORT, "b": FITS})
        assert result.started == "b" and result.report.blocked is None
        (event,) = held(result.actions)
        assert event.subject == "a" and event.warning and event.related == ("Node", "a")
        assert result.report.anchor == "b"


def test_when_no_eligible_candidate_fits_the_pool_is_held_with_the_shortfall() -> None:
    obs = pool(claim("a", OLDER), claim("b", OLD))
    other = Verdict("b", 1, stranded=("q",), missing=Resources(0, 512, 0))
    result = step(obs, [policy()], NOW, relocation={"a": SHORT, "b": other})
    blocked = result.report.blocked
    assert isinstance(blocked, LedgerBlocked) and blocked.reason is GateReason.LEDGER_CAPACITY
    assert blocked.nodeclaim == "a" and blocked.verdict == SHORT and blocked.until is None
    assert result.report.reason == "ledgerCapacity" and result.started is None
    assert not any(
        isinstance(a, Announce) and a.reason == "RotationStarted" for a in result.actions
    )
    assert [e.subject for e in held(result.actions)] == ["a", "b"]
    # Nothing in the cluster need change for the room to appear: looked at again on a timer.
    assert result.quiet_until == NOW + LONG_REQUEUE == result.requeue_at


def test_the_gate_never_holds_an_anchored_rotation() -> None:
    obs = pool(claim("a", OLDER), annotations={ann.ACTIVE_ROTATION: "a"})
    plain = step(obs, [policy()], NOW)
    assert step(obs, [policy()], NOW, relocation={"a": SHORT}).actions == plain.actions


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
