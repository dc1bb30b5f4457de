"""The start gates of a pass: one list, the first closed one in order, the budget and the ledger
only with a claim; the list is the only place a gate is asked from, in the documented order."""

from __future__ import annotations

import ast
import re
from datetime import timedelta
from pathlib import Path

from fleetgate.domain.capacity.relocation import Verdict
from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation import gating
from fleetgate.domain.rotation.actions import Announce
from fleetgate.domain.rotation.budgets import budgets_from_spec
from fleetgate.domain.rotation.cluster import PoolObservation
from fleetgate.domain.rotation.context import MachineConfig, Pass
from fleetgate.domain.rotation.gates import GateReason
from fleetgate.domain.rotation.gating import RETRY_GATES, START_GATES, retry_gates, start_gates
from fleetgate.domain.rotation.ledger_gate import HELD
from fleetgate.domain.rotation.reference import REFERENCE_CLAIM_STATE
from tests.unit.domain.rotation.test_machine import DUE, NOW, claim, policy, pool

NONE_ALLOWED = budgets_from_spec([{"nodes": "0"}])
FROZEN = {ann.FREEZE: ann.format_timestamp(NOW + timedelta(hours=1))}
ROOT = Path(__file__).parents[4]
ROTATION = ROOT / "packages/domain/src/fleetgate/domain/rotation"


def _pass(obs: PoolObservation, relocation: dict[str, Verdict] | None = None) -> Pass:
    return Pass.begin(obs, policy().resolve(None), NOW, MachineConfig(), relocation=relocation)


def test_the_first_closed_gate_in_order_holds_the_start_back() -> None:
    marked = claim("a", DUE, annotations={REFERENCE_CLAIM_STATE: "pending"})
    both = _pass(pool(marked, annotations=FROZEN, budgets=NONE_ALLOWED))
    blocked = start_gates(both).blocked
    assert blocked is not None and blocked.reason is GateReason.REFERENCE_CONTROLLER_ACTIVE
    frozen = start_gates(_pass(pool(claim("a", DUE), annotations=FROZEN, budgets=NONE_ALLOWED)))
    assert frozen.blocked is not None and frozen.blocked.reason is GateReason.FROZEN
    assert frozen.claim is None  # a closed gate lets no claim through
    budget = start_gates(_pass(pool(claim("a", DUE), budgets=NONE_ALLOWED))).blocked
    assert budget is not None and budget.reason is GateReason.DISRUPTION_BUDGET
    open_ = start_gates(_pass(pool(claim("a", DUE))))
    assert open_.blocked is None and open_.claim is not None and open_.claim.name == "a"


def test_the_budget_is_asked_only_when_a_claim_could_start() -> None:
    young = _pass(pool(claim("a", timedelta(days=1)), budgets=NONE_ALLOWED))
    assert young.census.candidate() is None
    gated = start_gates(young)
    assert gated.blocked is None and gated.claim is None  # the census answers "why not?"
    # A retry has its claim already: the budget is asked, and the reference's markers are not.
    failed = young.obs.claims[0]
    assert (gate := retry_gates(young, failed)) is not None
    assert gate.reason is GateReason.DISRUPTION_BUDGET
    marked = claim("a", DUE, annotations={REFERENCE_CLAIM_STATE: "pending"})
    assert retry_gates(_pass(pool(marked)), marked) is None


def test_the_ledger_gate_is_asked_last_and_only_with_verdicts() -> None:
    full = Verdict(node="a", placements=1, stranded=("x",))
    # Every other gate open: the ledger gate hands the start to the next claim that fits.
    two = pool(claim("a", DUE + timedelta(hours=1)), claim("b", DUE))
    handed = start_gates(_pass(two, {"a": full}))
    assert handed.blocked is None and handed.claim is not None and handed.claim.name == "b"
    assert [(type(a), a.subject) for a in handed.announced] == [(Announce, "a")]
    assert all(isinstance(a, Announce) and a.reason == HELD for a in handed.announced)
    # An earlier closed gate decides before the ledger is read.
    frozen = start_gates(_pass(pool(claim("a", DUE), annotations=FROZEN), {"a": full}))
    assert frozen.blocked is not None and frozen.blocked.reason is GateReason.FROZEN
    assert frozen.announced == ()
    # Without verdicts (the ledger not consulted) the gate is open.
    assert start_gates(_pass(pool(claim("a", DUE)))).claim is not None


def test_the_retry_gates_are_the_lists_entries_marked_for_a_retry() -> None:
    assert tuple(g for g in START_GATES if g.on_retry) == RETRY_GATES
    retried = {g.reason for g in RETRY_GATES}
    assert GateReason.REFERENCE_CONTROLLER_ACTIVE not in retried
    assert GateReason.LEDGER_CAPACITY not in retried
    assert [g.reason for g in START_GATES if g.needs_claim] == [
        GateReason.DISRUPTION_BUDGET,
        GateReason.LEDGER_CAPACITY,
    ]


def test_the_list_holds_every_reason_once_in_the_order_the_operator_guide_documents() -> None:
    reasons = [g.reason for g in START_GATES]
    assert sorted(reasons) == sorted(GateReason)  # every reason code is one entry, once
    table = (ROOT / "docs/rotation.md").read_text().split("## 6. Start gates", 1)[1]
    rows = re.findall(r"^\| (\d+) \| `(\w+)` \|", table, flags=re.MULTILINE)
    assert [int(n) for n, _ in rows] == list(range(len(rows)))
    assert [code for _, code in rows] == [r.value for r in reasons]


def _gate_functions() -> dict[str, Path]:
    """Every function of the rotation domain that closes a gate (builds a ``Blocked``)."""
    found: dict[str, Path] = {}
    for path in ROTATION.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef):
                continue
            built = {
                call.func.id
                for call in ast.walk(node)
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
            }
            if built & {"Blocked", "LedgerBlocked"}:
                found[node.name] = path
    return found


def test_no_gate_is_asked_from_anywhere_but_the_list() -> None:
    gates = _gate_functions()
    listed = {g.check.__name__ for g in START_GATES}
    assert set(gates) == listed, "a function that closes a gate must be an entry of START_GATES"
    sources = ROOT.glob("packages/*/src/fleetgate/**/*.py")
    for path in sources:
        if path == Path(gating.__file__):
            continue
        tree = ast.parse(path.read_text())
        named = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        named |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        named |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        asked = sorted(name for name in named & set(gates) if gates[name] != path)
        assert not asked, f"{path.relative_to(ROOT)} asks {asked} outside the gate list"
