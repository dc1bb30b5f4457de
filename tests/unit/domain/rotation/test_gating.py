"""The start gates of a pass: the first closed one in order, the budget only with a candidate."""

from __future__ import annotations

from datetime import timedelta

from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.budgets import budgets_from_spec
from fleetgate.domain.rotation.cluster import PoolObservation
from fleetgate.domain.rotation.context import MachineConfig, Pass
from fleetgate.domain.rotation.gates import GateReason
from fleetgate.domain.rotation.gating import retry_gates, start_gates
from fleetgate.domain.rotation.reference import REFERENCE_CLAIM_STATE
from tests.unit.domain.rotation.test_machine import DUE, NOW, claim, policy, pool

NONE_ALLOWED = budgets_from_spec([{"nodes": "0"}])
FROZEN = {ann.FREEZE: ann.format_timestamp(NOW + timedelta(hours=1))}


def _pass(obs: PoolObservation) -> Pass:
    return Pass(obs, policy().resolve(None), NOW, MachineConfig())


def test_the_first_closed_gate_in_order_holds_the_start_back() -> None:
    marked = claim("a", DUE, annotations={REFERENCE_CLAIM_STATE: "pending"})
    both = _pass(pool(marked, annotations=FROZEN, budgets=NONE_ALLOWED))
    blocked = start_gates(both)
    assert blocked is not None and blocked.reason is GateReason.REFERENCE_CONTROLLER_ACTIVE
    frozen = start_gates(_pass(pool(claim("a", DUE), annotations=FROZEN, budgets=NONE_ALLOWED)))
    assert frozen is not None and frozen.reason is GateReason.FROZEN
    budget = start_gates(_pass(pool(claim("a", DUE), budgets=NONE_ALLOWED)))
    assert budget is not None and budget.reason is GateReason.DISRUPTION_BUDGET
    assert start_gates(_pass(pool(claim("a", DUE)))) is None


def test_the_budget_is_asked_only_when_a_claim_could_start() -> None:
    young = _pass(pool(claim("a", timedelta(days=1)), budgets=NONE_ALLOWED))
    assert young.candidate is None
    assert start_gates(young) is None  # the census answers "why not?" instead
    # A retry has its claim already: the budget is asked, and the reference's markers are not.
    assert (gate := retry_gates(young)) is not None
    assert gate.reason is GateReason.DISRUPTION_BUDGET
    marked = claim("a", DUE, annotations={REFERENCE_CLAIM_STATE: "pending"})
    assert retry_gates(_pass(pool(marked))) is None
