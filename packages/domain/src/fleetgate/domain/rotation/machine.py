"""The rotation machine: one pass over one NodePool as a pure step (spec §7).

``step(observation, policies, now)`` reads the pool as the cluster shows it — every piece of
rotation state is an annotation on the pool, its claims or its nodes — and returns the actions
that move it on, in the order the shell must apply them, plus a report of what it saw (for the
gauges, and for "why is nothing rotating?"). It never remembers anything between calls, which is
why a controller restarted after any single write finishes the rotation correctly. The census
(``census.py``) answers every question about the pool's claims; the step builds it at its entry,
from the census a shell carries between calls (which only spares work and changes no decision)
or afresh.

A pass, in order: govern (is the pool ours?); advance the census; observe (report.py: what the
pass sees, and the warnings it announces); then either move the anchored rotation on
(anchored.py), or try a start: schedule feasibility, the start gates in their one list
(gating.py, the ledger gate last), the claim they let through, the limits' headroom, and the
start itself (a surge, pending.py, or the forceful fallback).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from fleetgate.domain.capacity.relocation import Verdict
from fleetgate.domain.durations import format_duration
from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.actions import (
    REAP_ROTATION,
    RESOLVE_POLICY,
    ROTATE_NODE,
    ROTATE_SURGELESS,
    WRITES,
    Action,
    AnnotateClaim,
    AnnotatePool,
    Announce,
    CountCompletion,
    CountForcefulFallback,
    DeleteClaim,
    Log,
)
from fleetgate.domain.rotation.anchored import advance
from fleetgate.domain.rotation.census import PoolCensus
from fleetgate.domain.rotation.cluster import NodeClaimView, PoolObservation
from fleetgate.domain.rotation.constants import LONG_REQUEUE, SHORT_REQUEUE
from fleetgate.domain.rotation.context import CLEAR_ANCHOR, MachineConfig, Pass
from fleetgate.domain.rotation.fallback import surgeless_fallback
from fleetgate.domain.rotation.gates import NO_ELIGIBLE_CLAIM, Blocked, GateReason
from fleetgate.domain.rotation.gating import start_gates
from fleetgate.domain.rotation.governance import Governance, Status, govern
from fleetgate.domain.rotation.ledger_gate import HELD, LedgerBlocked, drain_hold
from fleetgate.domain.rotation.pending import build, headroom_ok, pending
from fleetgate.domain.rotation.policy import RotationPolicy
from fleetgate.domain.rotation.quiet import (
    earliest,
    gate_change,
    next_eligibility,
    quiet_anchored,
    settled_anchored,
)
from fleetgate.domain.rotation.reference import release_reference_markers
from fleetgate.domain.rotation.report import PoolReport, observe
from fleetgate.domain.rotation.selection import Bucket, ClaimView, DriftRule, deadline, drift_rule

__all__ = ["MachineConfig", "PoolCensus", "PoolReport", "Step", "step"]


@dataclass(frozen=True)
class Step:
    """The outcome of a pass: actions in order, when to look again (None: only on change)."""

    actions: tuple[Action, ...]
    requeue_at: datetime | None
    report: PoolReport
    started: str | None = None
    """The claim a rotation was started for in this pass, if any."""
    drift_rule: DriftRule | None = None
    """Why the started claim, which Karpenter reports ``Drifted``, is fleetgate's to rotate."""
    quiet_until: datetime | None = None
    """When the step wrote nothing: until this instant a pass over an *unchanged* pool would
    write nothing either (None: not before something in the cluster changes). A simulator may
    skip the passes in between; a real controller simply requeues."""
    settled_until: datetime | None = None
    """When the step writes: until this instant a pass over the pool exactly as these writes
    leave it would write nothing (None: no such promise, look again as requeued). A simulator
    may skip the look-again passes in between; a real controller simply requeues."""
    census: PoolCensus | None = field(default=None, compare=False, repr=False)
    """The census advanced to this pass's observation, for the shell to carry to the next pass
    (None only for a pool the step does not govern, given none). Not part of the decision: a
    step given a carried census decides exactly what one given none decides."""
    needs_ledger: bool = False
    """The step was made without the ledger's plans and decided something gate 9 judges (a
    start, or the deletion of a NodeClaim: a drain, a surge's rollback): a shell with the node
    sync on asks the ledger and steps again with its plans (``relocation``)."""

    @property
    def writes(self) -> bool:
        """Whether the step changes the cluster."""
        return any(isinstance(a, WRITES) for a in self.actions)


def step(
    obs: PoolObservation,
    policies: Sequence[RotationPolicy],
    now: datetime,
    config: MachineConfig | None = None,
    census: PoolCensus | None = None,
    relocation: Mapping[str, Verdict] | None = None,
) -> Step:
    """One pass over one pool (spec §7.2).

    ``census`` is the pool's census carried from the last pass (the shell keeps one per pool;
    None: the step starts one): the step advances it to ``obs`` and returns the advanced one in
    ``Step.census`` for the next pass (the one given is spent), and decides exactly what it
    would decide with a new one.
    ``relocation`` is the capacity ledger's verdict on the pool's nodes that hold placements
    (None: the ledger is not consulted; gate 9, ledger_gate.py).
    """
    config = config or MachineConfig()
    gov = govern(obs.labels, policies, obs.termination_grace_period)
    anchor = obs.annotations.get(ann.ACTIVE_ROTATION) or None
    resolved = gov.resolved
    if not gov.governed or resolved is None:
        return _ungoverned(obs, gov, anchor, now, census)
    decided = _decide(Pass.begin(obs, resolved, now, config, census, relocation), gov, anchor)
    if relocation is None and (
        decided.started is not None or any(isinstance(a, DeleteClaim) for a in decided.actions)
    ):
        return replace(decided, needs_ledger=True)
    return decided


def _decide(p: Pass, gov: Governance, anchor: str | None) -> Step:
    """Report what the pass sees, then release, move the anchored rotation on, or try a start."""
    report, actions = observe(p, gov, anchor)
    released = release_reference_markers(p.obs) if p.config.reference_gone else []
    if released:  # the reference is gone: undo what it owned first, then look again
        return Step(tuple(actions + released), p.now + SHORT_REQUEUE, report, census=p.census)
    if anchor is not None:
        return _advance_anchored(p, anchor, report, actions)
    return _try_start(p, report, actions)


def _advance_anchored(p: Pass, anchor: str, report: PoolReport, actions: list[Action]) -> Step:
    """A rotation is under way: move it on, and say until when nothing more can happen."""
    more, requeue = advance(p, anchor)
    if p.relocation is not None and more != advance(replace(p, relocation=None), anchor)[0]:
        # Gate 9 changed what the cluster alone would have this pass do (a drain waits): the
        # ledger, not the cluster, may change that, so no quiet is promised past the next look.
        claim = p.obs.claim(anchor)
        hold = None if claim is None else drain_hold(p, claim)
        if hold is not None and any(isinstance(a, Announce) and a.reason == HELD for a in more):
            report = replace(report, ledger_hold=hold, reason=GateReason.LEDGER_CAPACITY.value)
        return Step(tuple(actions + more), requeue, report, quiet_until=p.now, census=p.census)
    quiet = quiet_anchored(p, anchor)
    settled = settled_anchored(p, anchor, more, advance)
    return Step(
        tuple(actions + more),
        requeue,
        report,
        quiet_until=quiet,
        settled_until=settled,
        census=p.census,
    )


def _try_start(p: Pass, report: PoolReport, actions: list[Action]) -> Step:
    """No rotation under way: start one when the schedule is feasible, every start gate is open
    and a claim is eligible; otherwise say why not."""
    derivation = report.derivation
    assert derivation is not None and report.census is not None
    if derivation.fatal:
        codes = ",".join(f.code.value for f in derivation.findings if f.fatal)
        why = Log(
            "schedule feasibility is fatal; not starting a rotation",
            {"findings": codes},
            dedup=f"fatal:{codes}",
        )
        return _not_started(p, report, [*actions, why], None, reason="fatal")
    gated = start_gates(p)
    actions = [*actions, *gated.announced]
    if gated.blocked is not None:
        if isinstance(gated.blocked, LedgerBlocked):  # a surge-less start held (ledger_gate.py)
            return _gated(
                p, replace(report, ledger_hold=gated.blocked.hold), actions, gated.blocked
            )
        return _gated(p, report, actions, gated.blocked)
    chosen = gated.claim
    if chosen is None:
        counts = report.census.as_dict()
        why = Log(
            "no rotation candidate",
            {"reason": NO_ELIGIBLE_CLAIM, **counts},
            dedup=f"{NO_ELIGIBLE_CLAIM}:{sorted(counts.items())}",
        )
        quiet = earliest(next_eligibility(p), gate_change(p))
        return _not_started(p, report, [*actions, why], quiet, reason=NO_ELIGIBLE_CLAIM)
    return _start(p, report, actions, chosen)


def _gated(p: Pass, report: PoolReport, actions: list[Action], blocked: Blocked) -> Step:
    """A start gate is closed: say which, and until when it stays so by time alone."""
    fields = {"reason": blocked.reason.value}
    if blocked.until is not None:
        fields["until"] = ann.format_timestamp(blocked.until)
    why = Log("no rotation candidate", fields, dedup=blocked.reason.value)
    # The ledger changes without the cluster changing: a pool it holds is looked at again.
    quiet = (
        p.now + LONG_REQUEUE
        if isinstance(blocked, LedgerBlocked)
        else earliest(blocked.until, gate_change(p))
    )
    return _not_started(
        p, report, [*actions, why], quiet, blocked=blocked, reason=blocked.reason.value
    )


def _not_started(
    p: Pass,
    report: PoolReport,
    actions: list[Action],
    quiet_until: datetime | None,
    reason: str,
    blocked: Blocked | None = None,
) -> Step:
    """A pass that starts nothing, for ``reason``: look again later (or once ``quiet_until``
    passes)."""
    return Step(
        tuple(actions),
        p.now + LONG_REQUEUE,
        replace(report, reason=reason, blocked=blocked),
        quiet_until=quiet_until,
        census=p.census,
    )


def _start(p: Pass, report: PoolReport, actions: list[Action], chosen: ClaimView) -> Step:
    """Anchor the pool on ``chosen`` and take the rotation's first step: a surge, or (too close
    to its forced expiry for one) the forceful fallback's drain."""
    claim = p.obs.claim(chosen.name)
    assert claim is not None
    surgeless = surgeless_fallback(p, claim)
    built = None if surgeless else build(p, claim)
    if built is not None and not headroom_ok(p, claim, built):
        why = Log(
            "insufficient limits headroom; cannot surge",
            {"nodeclaim": claim.name},
            dedup=f"headroom:{claim.name}",
        )
        return _not_started(p, report, [*actions, why], None, reason="headroom")
    rule = drift_rule(chosen, Bucket.ELIGIBLE, p.policy.selection)
    assert report.census is not None
    actions += _announce_start(p, chosen, claim, report.census.eligible, surgeless, rule)
    anchored = _with_anchor(p, claim.name)
    if surgeless:
        more, requeue = _start_forceful(anchored, claim)
    else:
        more, requeue = pending(anchored, claim, built)
    report = replace(report, anchor=claim.name)
    return Step(
        tuple(actions + more),
        requeue,
        report,
        started=claim.name,
        drift_rule=rule,
        quiet_until=p.now,
        census=p.census,
    )


def _announce_start(
    p: Pass,
    chosen: ClaimView,
    claim: NodeClaimView,
    eligible: int,
    surgeless: bool,
    rule: DriftRule | None,
) -> list[Action]:
    """The anchor write (conditional on the pool's version), its log line and its event."""
    due = deadline(chosen)
    fields: dict[str, object] = {
        "nodeclaim": claim.name,
        "age": format_duration(p.now - claim.created_at),
        "eligible": eligible,
        "surgeless": surgeless,
        "deadline": ann.format_timestamp(due) if due else None,
    }
    if rule is not None:
        fields["rule"] = rule.value
    message = f"rotating NodeClaim {claim.name}"
    message += " surge-less (forceful fallback)" if surgeless else ""
    message += _DRIFT_NOTE[rule] if rule is not None else ""
    return [
        AnnotatePool(p.obs.name, {ann.ACTIVE_ROTATION: claim.name}, expect_version=p.obs.version),
        Log("rotation candidate selected", fields),
        Announce(
            "RotationStarted",
            message,
            p.obs.name,
            action=ROTATE_NODE,
            related=("NodeClaim", claim.name),
        ),
    ]


_DRIFT_NOTE = {
    DriftRule.DUE: " (Drifted, but Karpenter has not replaced it and it is due: rule driftedDue)",
    DriftRule.ROTATE_DRIFTED: " (Drifted; the policy sets rotateDrifted)",
}


def _start_forceful(p: Pass, claim: NodeClaimView) -> tuple[list[Action], datetime | None]:
    patch: dict[str, str | None] = {
        ann.ACTIVE_ROTATION_STATE: ann.MIRROR_DRAINING,
        ann.ROTATION_MODE: ann.MODE_FORCEFUL_FALLBACK,
    }
    if ann.DRAINING_AT not in p.obs.annotations:
        patch[ann.DRAINING_AT] = p.stamp
    return [
        AnnotatePool(p.obs.name, patch),
        AnnotateClaim(claim.name, {ann.CLAIM_STATE: ann.ClaimState.DRAINING.value}),
        CountForcefulFallback(),
        Announce(
            "ForcefulFallback",
            f"NodeClaim {claim.name} is too close to its forced expiry "
            "for a surge; draining it without a replacement first",
            p.obs.name,
            warning=True,
            action=ROTATE_SURGELESS,
        ),
        Log("drain started", {"nodeclaim": claim.name, "mode": "forceful-fallback"}),
        DeleteClaim(claim.name),
    ], p.now + SHORT_REQUEUE


def _ungoverned(
    obs: PoolObservation,
    gov: Governance,
    anchor: str | None,
    now: datetime,
    census: PoolCensus | None,
) -> Step:
    """Reap an anchored rotation the pool's policy no longer covers (§7.9), then stand by (the
    census, not advanced, is handed back as it came)."""
    actions = _reap(obs, gov, anchor, now) if anchor is not None else []
    report = PoolReport(pool=obs.name, governance=gov, reason=gov.status.value)
    if gov.status is not Status.CONFLICT:
        return Step(tuple(actions), None, report, quiet_until=None, census=census)
    actions += [
        Announce(
            "PolicyConflict",
            gov.detail,
            obs.name,
            warning=True,
            dedup=f"PolicyConflict:{gov.detail}",
            action=RESOLVE_POLICY,
        ),
        Log(
            "policy conflict; not rotating", {"detail": gov.detail}, dedup=f"conflict:{gov.detail}"
        ),
    ]
    return Step(tuple(actions), now + LONG_REQUEUE, report, quiet_until=None, census=census)


def _reap(obs: PoolObservation, gov: Governance, anchor: str, now: datetime) -> list[Action]:
    """Governance lost: undo our markers; the claim's own state is left as it is (§12.6)."""
    from fleetgate.domain.rotation.sweep import sweep

    released = [
        a
        for a in sweep(_without_anchor(obs), now)
        if not isinstance(a, (AnnotateClaim, CountCompletion, Log))
    ]
    return [
        *released,
        AnnotatePool(obs.name, dict(CLEAR_ANCHOR)),
        Announce(
            "GovernanceLost",
            f"rotation of {anchor} abandoned: {gov.detail}",
            obs.name,
            warning=True,
            action=REAP_ROTATION,
        ),
    ]


def _with_anchor(p: Pass, name: str) -> Pass:
    # ``with_changes`` keeps the observation's look-up indexes (``replace`` would drop them).
    obs = p.obs.with_changes({**p.obs.annotations, ann.ACTIVE_ROTATION: name}, {}, {})
    return replace(p, obs=obs)


def _without_anchor(obs: PoolObservation) -> PoolObservation:
    rest = {k: v for k, v in obs.annotations.items() if k != ann.ACTIVE_ROTATION}
    return replace(obs, annotations=rest)
