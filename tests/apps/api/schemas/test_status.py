"""The rotation status body's gate 9 details (``ledger_hold``)."""

from __future__ import annotations

from datetime import UTC, datetime

from fleetgate.apps.api.schemas.status import ledger_hold
from fleetgate.domain.capacity.dimensions import Resources
from fleetgate.domain.capacity.relocation import Verdict
from fleetgate.domain.rotation.gates import Blocked, GateReason
from fleetgate.domain.rotation.ledger_gate import LedgerBlocked


def test_only_the_ledger_gate_carries_a_hold() -> None:
    verdict = Verdict("n-1", 5, stranded=("a", "b"), missing=Resources(8, 0, 0))
    blocked = LedgerBlocked(GateReason.LEDGER_CAPACITY, None, "claim-1", verdict)
    assert ledger_hold(blocked) == {
        "nodeclaim": "claim-1",
        "node": "n-1",
        "placements": 5,
        "fits": False,
        "stranded": 2,
        "missing": {"cpus": 8, "memory_mb": 0, "disk_gb": 0},
    }
    until = datetime(2024, 1, 1, tzinfo=UTC)
    assert ledger_hold(Blocked(GateReason.OUT_OF_WINDOW, until)) is None
    assert ledger_hold(None) is None
