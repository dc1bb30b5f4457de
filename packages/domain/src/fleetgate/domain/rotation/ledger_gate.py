"""Gate 9, ``ledgerCapacity``: never begin draining a node whose ledger placements have nowhere
to go (issues 33 and 41).

With the node sync on, a drained node's capacity-ledger placements are moved by the node's
relocation plan (``capacity.relocation.plan``); one the plan cannot place stays stranded on a
machine Karpenter is about to delete. The shell hands the step the plan of every pool node that
holds placements, judged on the ledger as it is: a surge node counts once it has joined the
ledger, as the node it is, and never before (nothing stands in for it). The gate reads them at
the two instants a drain can begin:

- **the start**: the candidate selection would start goes ahead when its plan fits now (or it
  holds nothing); otherwise the next eligible claim, in selection order, whose plan fits now
  starts instead, so one full node never holds back the rest of the pool. When none fits now,
  the first candidate starts all the same if its rotation brings a surge: the room it lacks may
  be the surge's, and the drain waits for it (below). A surge-less start (the forceful
  fallback) drains at once and brings nothing: it starts only if its plan fits now, else the
  pool is held (``LedgerBlocked``).
- **the drain** (make-before-break for capacity): once the surge is Ready, the old claim is
  deleted only if its plan fits the ledger as it is then, the surge included once the node sync
  has brought it in. If the placeholder landed on a node that already existed, Karpenter
  launched nothing and nothing new is in the ledger: the plan is judged without a surge, as it
  must be. A drain that does not fit waits, held, and is judged again every pass; the surge's
  readyTimeout still bounds the whole wait (the rotation then fails and retries as any other).

Neither instant clears on a timer: the gate opens on the first pass whose plan fits. What it
cannot hold is Karpenter's forced expiry: a node held until its ``expireAfter`` is drained by
Karpenter all the same, so every hold names the node's deadline and the time left.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from fleetgate.domain.capacity.relocation import Verdict
from fleetgate.domain.durations import format_duration
from fleetgate.domain.rotation.actions import ROTATE_NODE, Action, Announce, Log
from fleetgate.domain.rotation.annotations import format_timestamp
from fleetgate.domain.rotation.cluster import NodeClaimView
from fleetgate.domain.rotation.context import Pass
from fleetgate.domain.rotation.fallback import surgeless_fallback
from fleetgate.domain.rotation.gates import Blocked, Gated, GateReason
from fleetgate.domain.rotation.selection import ClaimView

__all__ = [
    "HELD",
    "LedgerBlocked",
    "LedgerHold",
    "drain_hold",
    "held_event",
    "ledger_gate",
    "ledger_hold",
    "ways_out",
]

HELD = "RotationHeldForCapacity"
"""The Event reason of a claim whose node's placements would not fit elsewhere."""


@dataclass(frozen=True)
class LedgerHold:
    """A node held by gate 9: at the start (``draining`` False) or before its drain (True).

    ``expires_at`` is the node's forced expiry (its claim's creation plus ``expireAfter``; None:
    it never expires) and ``time_left`` what is left of it at the pass (never below zero).
    """

    nodeclaim: str
    verdict: Verdict
    draining: bool = False
    expires_at: datetime | None = None
    time_left: timedelta | None = None

    def as_dict(self) -> dict[str, object]:
        """The wire form (status, ``fleetgate up``, the dashboard)."""
        return {
            "nodeclaim": self.nodeclaim,
            **self.verdict.as_dict(),
            "phase": "drain" if self.draining else "start",
            "expires_at": None if self.expires_at is None else format_timestamp(self.expires_at),
            "expires_in_seconds": None
            if self.time_left is None
            else self.time_left.total_seconds(),
        }


@dataclass(frozen=True)
class LedgerBlocked(Blocked):
    """Gate 9 closed at the start: the node whose placements do not fit, its plan, the hold."""

    nodeclaim: str = ""
    verdict: Verdict | None = None
    hold: LedgerHold | None = None


def ledger_hold(hold: LedgerHold | None) -> dict[str, object] | None:
    """Gate 9's hold, as status, ``fleetgate up`` and the dashboard show it (None: none)."""
    return None if hold is None else hold.as_dict()


def ways_out(verdict: Verdict) -> str:
    """What does not fit, by how much, and what the operator can do."""
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


def _deadline(hold: LedgerHold) -> str:
    if hold.expires_at is None or hold.time_left is None:
        return ""
    return (
        f". Karpenter force-expires node {hold.verdict.node} at "
        f"{format_timestamp(hold.expires_at)} (in {format_duration(hold.time_left)}) and then "
        "drains it held or not, stranding what has no room"
    )


def held_event(hold: LedgerHold) -> Announce:
    """The warning Event on the held claim: the shortfall, the ways out, the deadline."""
    when = "before its drain" if hold.draining else "at the start"
    return Announce(
        HELD,
        f"NodeClaim {hold.nodeclaim} held {when}: " + ways_out(hold.verdict) + _deadline(hold),
        hold.nodeclaim,
        subject_kind="NodeClaim",
        warning=True,
        dedup=f"{HELD}:{hold.nodeclaim}:{hold.draining}:"
        f"{sorted(hold.verdict.shortfall().as_dict().items())}",
        action=ROTATE_NODE,
        related=("Node", hold.verdict.node),
    )


def _hold(
    p: Pass, claim: NodeClaimView | None, name: str, verdict: Verdict, draining: bool
) -> LedgerHold:
    expire_after = None if claim is None else claim.expire_after
    if claim is None or expire_after is None:
        return LedgerHold(name, verdict, draining)
    expires_at = claim.created_at + expire_after
    left = max(expires_at - p.now, timedelta(0))
    return LedgerHold(name, verdict, draining, expires_at, left)


def _fits(claim: ClaimView, verdicts: Mapping[str, Verdict]) -> bool:
    verdict = verdicts.get(claim.node_name or "")
    return verdict is None or verdict.fits


def ledger_gate(p: Pass, first: ClaimView | None) -> Gated | None:
    """Open (None) when ``first``'s plan fits now; else the next eligible claim whose plan fits
    now, with the passed-over claims' held events; else ``first`` on its surge (its drain will
    wait for the room), or, when its start would be surge-less, the closed gate (the gate list
    asks it only with a claim).

    ``p.relocation`` maps node names to the ledger's plans (a node missing from it holds no
    placements, or the ledger is not consulted: it fits).
    """
    verdicts = p.relocation
    assert first is not None
    if not verdicts or _fits(first, verdicts):
        return None
    passed = [first]
    for claim in p.census.eligible():
        if claim.name == first.name:
            continue
        if _fits(claim, verdicts):
            return Gated(claim, None, _held(p, passed, verdicts))
        passed.append(claim)
    verdict = verdicts[first.node_name or ""]
    whole = p.obs.claim(first.name)
    if whole is None or not surgeless_fallback(p, whole):
        note = Log(
            "no node's placements fit the ledger now; starting the candidate on its surge, "
            "whose drain waits until the plan fits",
            {"nodeclaim": first.name, "node": verdict.node, "stranded": len(verdict.stranded)},
            dedup=f"on-surge:{first.name}",
        )
        return Gated(first, None, (note,))
    hold = _hold(p, whole, first.name, verdict, draining=False)
    blocked = LedgerBlocked(GateReason.LEDGER_CAPACITY, None, first.name, verdict, hold)
    return Gated(None, blocked, (held_event(hold),))


def _held(p: Pass, passed: list[ClaimView], verdicts: Mapping[str, Verdict]) -> tuple[Action, ...]:
    """A held event for each claim passed over for one whose plan fits."""
    return tuple(
        held_event(_hold(p, p.obs.claim(c.name), c.name, verdicts[c.node_name or ""], False))
        for c in passed
    )


def drain_hold(p: Pass, claim: NodeClaimView) -> LedgerHold | None:
    """Whether deleting ``claim`` must wait: its node's plan, judged on the ledger as it is now
    (``p.relocation``), does not fit (None: it fits, the node holds nothing, or the ledger is
    not consulted)."""
    if p.relocation is None or claim.node_name is None:
        return None
    verdict = p.relocation.get(claim.node_name)
    if verdict is None or verdict.fits:
        return None
    return _hold(p, claim, claim.name, verdict, draining=True)
