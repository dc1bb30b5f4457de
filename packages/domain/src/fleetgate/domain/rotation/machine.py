"""The rotation machine: one pass over one NodePool as a pure step (spec §7).

``step(observation, policies, now)`` reads the pool as the cluster shows it — every piece of
rotation state is an annotation on the pool, its claims or its nodes — and returns the actions
that move it on, in the order the shell must apply them, plus a report of what it saw (for the
gauges, and for "why is nothing rotating?"). It never remembers anything between calls, which is
why a controller restarted after any single write finishes the rotation correctly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
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
    ObserveDuration,
)
from fleetgate.domain.rotation.budgets import remaining
from fleetgate.domain.rotation.census import CensusCache
from fleetgate.domain.rotation.cluster import NodeClaimView, PoolObservation
from fleetgate.domain.rotation.constants import LONG_REQUEUE, SHORT_REQUEUE
from fleetgate.domain.rotation.context import (
    CLEAR_ANCHOR,
    MachineConfig,
    Pass,
)
from fleetgate.domain.rotation.disruption import budget_counts, not_ready_nodes
from fleetgate.domain.rotation.estimates import (
    OBSERVED_DRAIN,
    append_sample,
)
from fleetgate.domain.rotation.gates import (
    NO_ELIGIBLE_CLAIM,
    Blocked,
    PoolMarks,
    budget_gate,
    pool_state_gate,
    start_gate,
)
from fleetgate.domain.rotation.governance import Governance, Status, govern
from fleetgate.domain.rotation.ledger_gate import LedgerBlocked, ledger_gate
from fleetgate.domain.rotation.pending import advance_failed, build, headroom_ok, pending
from fleetgate.domain.rotation.policy import RotationPolicy
from fleetgate.domain.rotation.quiet import (
    earliest,
    gate_change,
    next_eligibility,
    quiet_anchored,
    settled_anchored,
)
from fleetgate.domain.rotation.reference import reference_gate, release_reference_markers
from fleetgate.domain.rotation.report import PoolReport, observe
from fleetgate.domain.rotation.selection import Bucket, DriftRule, deadline, drift_rule

__all__ = ["CensusCache", "MachineConfig", "PoolReport", "Step", "step", "surgeless_fallback"]


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

    @property
    def writes(self) -> bool:
        """Whether the step changes the cluster."""
        return any(isinstance(a, WRITES) for a in self.actions)


def surgeless_fallback(p: Pass, claim: NodeClaimView) -> bool:
    """ADR-0001: enabled, and the claim's deadline is nearer than a surge could still make."""
    if not p.policy.forceful_fallback or claim.expire_after is None:
        return False
    remaining = claim.created_at + claim.expire_after - p.now
    return remaining < p.policy.ready_timeout + p.policy.drain_bound


def step(
    obs: PoolObservation,
    policies: Sequence[RotationPolicy],
    now: datetime,
    config: MachineConfig | None = None,
    census: CensusCache | None = None,
    relocation: Mapping[str, Verdict] | None = None,
) -> Step:
    """One pass over one pool (spec §7.2).

    ``census`` is the pool's census from earlier passes (the caller keeps one per pool); the
    step brings it up to ``obs`` and decides exactly what it would decide without it.
    ``relocation`` is the capacity ledger's verdict on the pool's nodes that hold placements
    (None: the ledger is not consulted; gate 9, ledger_gate.py).
    """
    config = config or MachineConfig()
    gov = govern(obs.labels, policies, obs.termination_grace_period)
    anchor = obs.annotations.get(ann.ACTIVE_ROTATION) or None
    if not gov.governed or gov.resolved is None:
        return _ungoverned(obs, gov, anchor, now, config)
    resolved = gov.resolved
    if census is not None:
        census.refresh(obs, resolved.selection, resolved.lead_time_base, now)
    p = Pass(obs, resolved, now, config, census)
    report, actions = observe(p, gov, anchor)
    released = release_reference_markers(obs) if config.reference_gone else []
    if released:  # the reference is gone: undo what it owned first, then look again
        return Step(tuple(actions + released), now + SHORT_REQUEUE, report)
    if anchor is not None:
        more, requeue = advance(p, anchor)
        quiet = quiet_anchored(p, anchor)
        settled = settled_anchored(p, anchor, more, advance)
        return Step(
            tuple(actions + more), requeue, report, quiet_until=quiet, settled_until=settled
        )
    derivation = report.derivation
    assert derivation is not None and report.census is not None
    if derivation.fatal:
        codes = ",".join(f.code.value for f in derivation.findings if f.fatal)
        actions.append(
            Log(
                "schedule feasibility is fatal; not starting a rotation",
                {"findings": codes},
                dedup=f"fatal:{codes}",
            )
        )
        return Step(
            tuple(actions), now + LONG_REQUEUE, _with(report, reason="fatal"), quiet_until=None
        )
    marked = census is None or census.reference_marked
    blocked = reference_gate(obs, marked) or start_gate(
        now, p.policy, PoolMarks.from_annotations(obs.annotations)
    )
    blocked = blocked or pool_state_gate(obs.static, obs.ready)
    if blocked is None and p.candidate is not None:
        # Last, and only with a candidate: when nothing may go, the census is the better answer
        # to "why not?", and the walk over the pool that counting the budget takes is skipped.
        blocked = _budget_gate(p)
    chosen = p.candidate
    if blocked is None and chosen is not None and relocation:
        chosen, blocked, held = ledger_gate(p, relocation)
        actions += held
    if blocked is not None:
        fields = {"reason": blocked.reason.value}
        if blocked.until is not None:
            fields["until"] = ann.format_timestamp(blocked.until)
        actions.append(Log("no rotation candidate", fields, dedup=blocked.reason.value))
        requeue = now + LONG_REQUEUE
        blocked_report = _with(report, blocked=blocked, reason=blocked.reason.value)
        return Step(
            tuple(actions),
            requeue,
            blocked_report,
            # The ledger changes without the cluster changing: a held pool is looked at again.
            quiet_until=now + LONG_REQUEUE
            if isinstance(blocked, LedgerBlocked)
            else earliest(blocked.until, gate_change(p)),
        )
    # ``pick`` over the buckets the census already computed for this pass.
    if chosen is None:
        counts = report.census.as_dict()
        actions.append(
            Log(
                "no rotation candidate",
                {"reason": NO_ELIGIBLE_CLAIM, **counts},
                dedup=f"{NO_ELIGIBLE_CLAIM}:{sorted(counts.items())}",
            )
        )
        return Step(
            tuple(actions),
            now + LONG_REQUEUE,
            _with(report, reason=NO_ELIGIBLE_CLAIM),
            quiet_until=earliest(next_eligibility(p), gate_change(p)),
        )
    claim = obs.claim(chosen.name)
    assert claim is not None
    surgeless = surgeless_fallback(p, claim)
    built = None if surgeless else build(p, claim)
    if built is not None and not headroom_ok(p, claim, built):
        actions.append(
            Log(
                "insufficient limits headroom; cannot surge",
                {"nodeclaim": claim.name},
                dedup=f"headroom:{claim.name}",
            )
        )
        return Step(
            tuple(actions), now + LONG_REQUEUE, _with(report, reason="headroom"), quiet_until=None
        )
    due = deadline(chosen)
    rule = drift_rule(chosen, Bucket.ELIGIBLE, p.policy.selection)
    actions.append(
        AnnotatePool(obs.name, {ann.ACTIVE_ROTATION: claim.name}, expect_version=obs.version)
    )
    actions.append(
        Log(
            "rotation candidate selected",
            {
                "nodeclaim": claim.name,
                "age": format_duration(now - claim.created_at),
                "eligible": report.census.eligible,
                "surgeless": surgeless,
                "deadline": ann.format_timestamp(due) if due else None,
            }
            | ({"rule": rule.value} if rule is not None else {}),
        )
    )
    actions.append(
        Announce(
            "RotationStarted",
            f"rotating NodeClaim {claim.name}"
            + (" surge-less (forceful fallback)" if surgeless else "")
            + (_DRIFT_NOTE[rule] if rule is not None else ""),
            obs.name,
            action=ROTATE_NODE,
            related=("NodeClaim", claim.name),
        )
    )
    anchored = _with_anchor(p, claim.name)
    if surgeless:
        more, requeue = _start_forceful(anchored, claim)
    else:
        more, requeue = pending(anchored, claim, built)
    report = _with(report, anchor=claim.name)
    return Step(
        tuple(actions + more),
        requeue,
        report,
        started=claim.name,
        drift_rule=rule,
        quiet_until=now,
    )


_DRIFT_NOTE = {
    DriftRule.DUE: " (Drifted, but Karpenter has not replaced it and it is due: rule driftedDue)",
    DriftRule.ROTATE_DRIFTED: " (Drifted; the policy sets rotateDrifted)",
}


def _budget_gate(p: Pass) -> Blocked | None:
    """Gate 8, unless the policy ignores the NodePool's budgets (the walk over the claims is
    made only when every other gate is open and the pool has budgets)."""
    obs = p.obs
    if p.policy.policy.ignore_disruption_budgets or not obs.budgets:
        return None
    # Most passes are decided without the walk: the census bounds the pool's Ready claims from
    # below (the buckets after NotReady hold only Ready ones; a budget allows no less for more
    # nodes) and the disruptions under way from above (deleting, being disrupted, opted out,
    # plus the Nodes not Ready); when even those leave room, the exact count cannot close it.
    counts = p.census.counts
    fewest = sum(counts.get(b, 0) for b in _READY_ONLY)
    most = sum(counts.get(b, 0) for b in _MAY_DISRUPT) + not_ready_nodes(obs)
    if remaining(obs.budgets, p.now, fewest, most) > 0:
        return None
    return budget_gate(obs.budgets, p.now, *budget_counts(obs))


_MAY_DISRUPT = (Bucket.OPTED_OUT, Bucket.DELETING, Bucket.KARPENTER_DISRUPTING)
_READY_ONLY = (
    Bucket.IN_FLIGHT,
    Bucket.TERMINAL,
    Bucket.IN_BACKOFF,
    Bucket.NOT_TRIGGERED,
    Bucket.ELIGIBLE,
)


def advance(p: Pass, name: str) -> tuple[list[Action], datetime | None]:
    """Move the anchored rotation of ``name`` on (spec §7.3)."""
    claim = p.obs.claim(name)
    mirror = p.obs.annotations.get(ann.ACTIVE_ROTATION_STATE)
    if claim is None:
        return _claim_gone(p, name, mirror == ann.MIRROR_DRAINING)
    state = claim.annotations.get(ann.CLAIM_STATE, "")
    if state in ("", ann.ClaimState.PENDING):
        return pending(p, claim)
    if state == ann.ClaimState.DRAINING:
        actions: list[Action] = []
        if mirror != ann.MIRROR_DRAINING or ann.DRAINING_AT not in p.obs.annotations:
            patch: dict[str, str | None] = {ann.ACTIVE_ROTATION_STATE: ann.MIRROR_DRAINING}
            if ann.DRAINING_AT not in p.obs.annotations:
                patch[ann.DRAINING_AT] = p.stamp
            actions.append(AnnotatePool(p.obs.name, patch))
        if not claim.deleting:
            actions.append(DeleteClaim(name))
        return actions, p.now + SHORT_REQUEUE
    if state == ann.ClaimState.FAILED:
        blocked = start_gate(p.now, p.policy, PoolMarks.from_annotations(p.obs.annotations))
        blocked = blocked or pool_state_gate(p.obs.static, p.obs.ready) or _budget_gate(p)
        return advance_failed(p, claim, blocked is None)
    if state == ann.ClaimState.EXPIRED:
        return [*p.release(name), AnnotatePool(p.obs.name, dict(CLEAR_ANCHOR))], None
    return [
        Log(
            "anchored claim has an unknown state; holding",
            {"nodeclaim": name, "state": state},
            dedup=f"unknown:{state}",
        )
    ], p.now + LONG_REQUEUE


def _claim_gone(p: Pass, name: str, draining: bool) -> tuple[list[Action], datetime | None]:
    host = next((n.name for n in p.surge_hosts(name)), None)
    actions = p.release(name)
    if not draining:
        actions += [
            CountCompletion("expired"),
            AnnotatePool(p.obs.name, dict(CLEAR_ANCHOR)),
            Log("rotation ended: the claim expired before it was drained", {"nodeclaim": name}),
        ]
        return actions, None
    draining_at = ann.read_timestamp(p.obs.annotations, ann.DRAINING_AT)
    drain = p.now - draining_at if draining_at is not None else None
    patch: dict[str, str | None] = {**CLEAR_ANCHOR, ann.LAST_ROTATION_AT: p.stamp}
    if drain is not None:
        patch[OBSERVED_DRAIN] = append_sample(p.obs.annotations, OBSERVED_DRAIN, drain)
    mode = p.obs.annotations.get(ann.ROTATION_MODE) or "surge"
    surge_wait = p.obs.annotations.get(ann.SURGE_WAIT)
    fields: dict[str, object] = {
        "nodeclaim": name,
        "mode": mode,
        "surgeNode": host,
        "surgeWait": surge_wait,
    }
    if drain is not None:
        fields["drain"] = format_duration(drain)
    actions += [CountCompletion("success"), AnnotatePool(p.obs.name, patch)]
    if drain is not None:
        actions.append(ObserveDuration("drain", drain.total_seconds()))
    actions += [
        Log("rotation complete", fields),
        Announce(
            "RotationCompleted",
            f"NodeClaim {name} rotated ({mode})",
            p.obs.name,
            action=ROTATE_NODE,
        ),
    ]
    return actions, None


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
    obs: PoolObservation, gov: Governance, anchor: str | None, now: datetime, config: MachineConfig
) -> Step:
    """Reap an anchored rotation the pool's policy no longer covers (§7.9), then stand by."""
    actions: list[Action] = []
    if anchor is not None:
        # Governance lost: undo our markers; the claim's own state is left as it is (§12.6).
        from fleetgate.domain.rotation.sweep import sweep

        released = [
            a
            for a in sweep(_without_anchor(obs), now)
            if not isinstance(a, (AnnotateClaim, CountCompletion, Log))
        ]
        actions += released
        actions.append(AnnotatePool(obs.name, dict(CLEAR_ANCHOR)))
        actions.append(
            Announce(
                "GovernanceLost",
                f"rotation of {anchor} abandoned: {gov.detail}",
                obs.name,
                warning=True,
                action=REAP_ROTATION,
            )
        )
    report = PoolReport(pool=obs.name, governance=gov, reason=gov.status.value)
    if gov.status is Status.CONFLICT:
        actions.append(
            Announce(
                "PolicyConflict",
                gov.detail,
                obs.name,
                warning=True,
                dedup=f"PolicyConflict:{gov.detail}",
                action=RESOLVE_POLICY,
            )
        )
        actions.append(
            Log(
                "policy conflict; not rotating",
                {"detail": gov.detail},
                dedup=f"conflict:{gov.detail}",
            )
        )
        return Step(tuple(actions), now + LONG_REQUEUE, report, quiet_until=None)
    return Step(tuple(actions), None, report, quiet_until=None)


def _with(report: PoolReport, **changes: object) -> PoolReport:
    return replace(report, **changes)  # type: ignore[arg-type]


def _with_anchor(p: Pass, name: str) -> Pass:
    # ``with_changes`` keeps the observation's look-up indexes (``replace`` would drop them).
    obs = p.obs.with_changes({**p.obs.annotations, ann.ACTIVE_ROTATION: name}, {}, {})
    return replace(p, obs=obs)


def _without_anchor(obs: PoolObservation) -> PoolObservation:
    rest = {k: v for k, v in obs.annotations.items() if k != ann.ACTIVE_ROTATION}
    return replace(obs, annotations=rest)
