"""``GET /v1/rotation/status``'s body: every pool as the controller sees it, in a stable shape.

Here rather than beside the route so the typed client (and ``fleetgate status``) can read it
without importing FastAPI.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from fleetgate.domain.durations import format_duration
from fleetgate.domain.rotation.ledger_gate import ledger_hold

if TYPE_CHECKING:  # the service is the server's; the client only validates answers
    from fleetgate.apps.services.rotationstatus import PoolStatus


class PoolRotationBody(BaseModel):
    """One pool: who governs it, its window, A/G/C, what blocks a start, the rotation in flight."""

    pool: str
    nodes: int
    governance: str = Field(description="governed, ungoverned, conflict or invalid.")
    policy: str | None
    window_open: bool
    next_window_start: datetime | None
    next_window_end: datetime | None
    age_threshold: str | None = Field(description="A, as a duration (e.g. 46h43m).")
    age_threshold_seconds: float | None
    guaranteed_chances: int | None = Field(description="G.")
    throughput_capacity: int | None = Field(description="C: rotations per shortest window.")
    rotating: str | None = Field(description="The NodeClaim being rotated, if any.")
    reason: str | None = Field(description="Why no rotation starts now (a gate code, ...).")
    gate_until: datetime | None
    findings: list[str] = Field(description="The derivation's finding codes.")
    ledger_hold: dict[str, object] | None = Field(
        default=None,
        description="Gate 9 (ledgerCapacity): the held NodeClaim and node, its placements, how "
        "many would be stranded, the shortfall, the phase (start or drain) and the node's "
        "forced expiry (expires_at, expires_in_seconds).",
    )

    @classmethod
    def of(cls, status: PoolStatus) -> PoolRotationBody:
        """From a pool's derived report."""
        r, d = status.report, status.report.derivation
        start, end = status.next_window or (None, None)
        return cls(
            pool=status.pool,
            nodes=status.nodes,
            governance=r.governance.status.value,
            policy=r.governance.winner or None,
            window_open=r.window_active,
            next_window_start=start,
            next_window_end=end,
            age_threshold=None if d is None else format_duration(d.age_threshold),
            age_threshold_seconds=None if d is None else d.age_threshold.total_seconds(),
            guaranteed_chances=None if d is None else d.guaranteed_chances,
            throughput_capacity=None if d is None else d.capacity,
            rotating=r.anchor,
            reason=r.reason,
            gate_until=None if r.blocked is None else r.blocked.until,
            findings=[] if d is None else [f.code for f in d.findings],
            ledger_hold=ledger_hold(r.ledger_hold),
        )
