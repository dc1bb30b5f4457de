"""Gate 9, ``ledgerCapacity``: never start draining a node whose ledger placements have nowhere
to go (issue 33).

With the node sync on, a drained node's capacity-ledger placements are relocated through the
placement walk; one no node takes stays stranded on a machine Karpenter is about to delete. The
shell judges, before the pass, every pool node that holds placements
(``capacity.relocation.judge``: the whole node, through the node guards, the walk with its demand
waiver, and the claims against the cluster total the rotation leaves) and hands the verdicts to
the step. This gate reads them: the candidate selection would start goes ahead when its node
fits (or holds nothing); otherwise the next eligible claim, in selection order, whose node fits
is started instead, so one full node never holds back the rest of the pool. Only when no
eligible claim fits is the pool blocked, with the first candidate's shortfall.

The gate never clears on a timer (``until`` None): it clears on the first pass whose verdict
fits, which a pool that is held re-checks every ``LONG_REQUEUE``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fleetgate.domain.capacity.relocation import Verdict
from fleetgate.domain.rotation.actions import ROTATE_NODE, Announce
from fleetgate.domain.rotation.context import Pass
from fleetgate.domain.rotation.gates import Blocked, Gated, GateReason
from fleetgate.domain.rotation.selection import ClaimView

__all__ = ["HELD", "LedgerBlocked", "ledger_gate", "ledger_hold", "ways_out"]

HELD = "RotationHeldForCapacity"
"""The Event reason of a claim whose node's placements would not fit elsewhere."""


@dataclass(frozen=True)
class LedgerBlocked(Blocked):
    """Gate 9 closed: the node whose placements do not fit, and the ledger's verdict on it."""

    nodeclaim: str = ""
    verdict: Verdict | None = None


def ledger_hold(blocked: Blocked | None) -> dict[str, object] | None:
    """Gate 9's details, as status, ``fleetgate up`` and the dashboard show them."""
    if not isinstance(blocked, LedgerBlocked) or blocked.verdict is None:
        return None
    return {"nodeclaim": blocked.nodeclaim, **blocked.verdict.as_dict()}


def ways_out(verdict: Verdict) -> str:
    """The event message: what does not fit, by how much, and what the operator can do."""
    short = verdict.shortfall()
    missing = ", ".join(f"{d} {v}" for d, v in short.as_dict().items() if v) or (
        "no dimension in total (the room is split across nodes)"
    )
    what = (
        f"{len(verdict.stranded)} of {verdict.placements} ledger placement(s) on node "
        f"{verdict.node} would have nowhere to go (missing: {missing})"
        if verdict.stranded
        else f"without node {verdict.node} the claims would no longer fit the cluster total "
        f"(missing: {missing})"
    )
    return (
        f"{what}; not draining it. "
        "Ways out: raise the pool's limits (or the nodes' overcommit), shrink a capacity claim, "
        "or add a node; the gate clears by itself on the first pass that finds the room"
    )


def _fits(claim: ClaimView, verdicts: Mapping[str, Verdict]) -> bool:
    verdict = verdicts.get(claim.node_name or "")
    return verdict is None or verdict.fits


def _held(claim: ClaimView, verdict: Verdict) -> Announce:
    return Announce(
        HELD,
        f"NodeClaim {claim.name}: " + ways_out(verdict),
        claim.name,
        subject_kind="NodeClaim",
        warning=True,
        dedup=f"{HELD}:{claim.name}:{sorted(verdict.shortfall().as_dict().items())}",
        action=ROTATE_NODE,
        related=("Node", verdict.node),
    )


def ledger_gate(p: Pass, first: ClaimView | None) -> Gated | None:
    """Open (None) when ``first``'s node fits; else the next eligible claim that fits, or the
    closed gate, with the held claims' events (the gate list asks it only with a claim).

    ``p.relocation`` maps node names to the ledger's verdict (a node missing from it holds no
    placements, or the ledger is not consulted: it fits).
    """
    verdicts = p.relocation
    assert first is not None
    if not verdicts or _fits(first, verdicts):
        return None
    held = [first]
    for claim in p.census.eligible():
        if claim.name == first.name:
            continue
        if _fits(claim, verdicts):
            return Gated(claim, None, tuple(_held(c, verdicts[c.node_name or ""]) for c in held))
        held.append(claim)
    verdict = verdicts[first.node_name or ""]
    blocked = LedgerBlocked(GateReason.LEDGER_CAPACITY, None, first.name, verdict)
    return Gated(None, blocked, tuple(_held(c, verdicts[c.node_name or ""]) for c in held))
