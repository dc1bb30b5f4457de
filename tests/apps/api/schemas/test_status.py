"""The rotation status body's gate 9 details (``ledger_hold``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fleetgate.apps.api.schemas.status import ledger_hold
from fleetgate.domain.capacity.dimensions import Resources
from fleetgate.domain.capacity.relocation import Verdict
from fleetgate.domain.rotation.ledger_gate import LedgerHold


def test_a_hold_carries_the_plan_the_phase_and_the_deadline() -> None:
    verdict = Verdict("n-1", 5, stranded=("a", "b"), missing=Resources(8, 0, 0))
    expires = datetime(2024, 1, 3, tzinfo=UTC)
    hold = LedgerHold("claim-1", verdict, True, expires, timedelta(hours=2))
    assert ledger_hold(hold) == {
        "nodeclaim": "claim-1",
        "node": "n-1",
        "placements": 5,
        "fits": False,
        "stranded": 2,
        "missing": {"cpus": 8, "memory_mb": 0, "disk_gb": 0},
        "phase": "drain",
        "expires_at": "2024-01-03T00:00:00Z",
        "expires_in_seconds": 7200.0,
    }
    never = ledger_hold(LedgerHold("claim-1", verdict))
    assert never is not None and never["phase"] == "start" and never["expires_at"] is None
    assert ledger_hold(None) is None
