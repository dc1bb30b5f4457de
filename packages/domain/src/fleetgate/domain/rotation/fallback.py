"""Whether a start takes the forceful fallback (ADR-0001): a drain at once, without a surge.

Asked where a start is decided (machine.py) and by the ledger gate, which must know whether the
start it lets through brings a surge or drains at once (ledger_gate.py).
"""

from __future__ import annotations

from fleetgate.domain.rotation.cluster import NodeClaimView
from fleetgate.domain.rotation.context import Pass

__all__ = ["surgeless_fallback"]


def surgeless_fallback(p: Pass, claim: NodeClaimView) -> bool:
    """ADR-0001: enabled, and the claim's deadline is nearer than a surge could still make."""
    if not p.policy.forceful_fallback or claim.expire_after is None:
        return False
    remaining = claim.created_at + claim.expire_after - p.now
    return remaining < p.policy.ready_timeout + p.policy.drain_bound
