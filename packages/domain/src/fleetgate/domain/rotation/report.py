"""What a pass saw (spec §7.2 step 1, §8): the report behind the gauges and "why not"."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.actions import CHECK_EXPIRY, EVALUATE_SCHEDULE, Action, Announce
from fleetgate.domain.rotation.context import Pass
from fleetgate.domain.rotation.derive import Derivation
from fleetgate.domain.rotation.disruption import pool_findings
from fleetgate.domain.rotation.estimates import KEYS, EstimateCheck, check_estimate, read_samples
from fleetgate.domain.rotation.gates import Blocked
from fleetgate.domain.rotation.governance import Governance
from fleetgate.domain.rotation.ledger_gate import LedgerHold
from fleetgate.domain.rotation.selection import Census


@dataclass(frozen=True)
class PoolReport:
    """What one pass saw: the gauges of spec §8.1 and the answer to "why is nothing rotating?"."""

    pool: str
    governance: Governance
    anchor: str | None = None
    window_active: bool = False
    freeze_until: datetime | None = None
    derivation: Derivation | None = None
    census: Census | None = None
    short_lead: tuple[str, ...] = ()
    drain_stuck: bool = False
    retry_count: int = 0
    blocked: Blocked | None = None
    reason: str | None = None
    """Why no rotation started this pass: a gate code, ``noEligibleClaim``, ``fatal``,
    ``headroom``, ``conflict``, ``ungoverned`` (None when one started or one is in flight)."""
    estimates: tuple[EstimateCheck, ...] = ()
    ledger_hold: LedgerHold | None = None
    """Gate 9 holds a node: at the start (the pool is blocked) or before its drain."""


UNREADABLE = "NodePoolUnreadable"
"""The Warning's reason for a pool whose objects hold a value that cannot be read."""


def unreadable(pool: str, problem: str) -> Announce:
    """What a pass says of a pool it could not read (it holds the pool): a Warning naming the
    field, once per distinct problem."""
    return Announce(
        UNREADABLE,
        problem,
        pool,
        warning=True,
        dedup=f"{UNREADABLE}:{problem}",
        action=EVALUATE_SCHEDULE,
    )


def observe(p: Pass, gov: Governance, anchor: str | None) -> tuple[PoolReport, list[Action]]:
    """Step 1 of a pass (§7.2): derive, take the census, and announce the pool's standing."""
    obs, now = p.obs, p.now
    derivation = p.policy.derive(obs.expire_after, len(obs.claims))
    pool_state = pool_findings(obs)
    if pool_state:  # the pool's own state, reported beside the derivation's findings
        derivation = replace(derivation, findings=derivation.findings + pool_state)
    census = p.census.headcount
    actions: list[Action] = []
    for f in derivation.findings:
        if not f.fatal:
            actions.append(
                Announce(
                    f.code.value,
                    f.message,
                    obs.name,
                    warning=True,
                    dedup=f.code.value,
                    action=EVALUATE_SCHEDULE,
                )
            )
    short = p.census.short_lead()
    for name in short:
        actions.append(
            Announce(
                "ShortLead",
                "expireAfter is within the lead time; rotated best-effort",
                name,
                "NodeClaim",
                warning=True,
                dedup=f"ShortLead:{name}",
                action=CHECK_EXPIRY,
            )
        )
    checks = _estimate_checks(p, derivation)
    for check in checks:
        if check.disagrees:
            actions.append(
                Announce(
                    "EstimateDisagreesWithObservation",
                    check.message(),
                    obs.name,
                    warning=True,
                    dedup=f"Estimate:{check.kind}:{check.observed}",
                    # fleetgate's own warning: it judges the policy's forecast inputs, as
                    # the reference's schedule findings do.
                    action=EVALUATE_SCHEDULE,
                )
            )
    freeze = ann.read_timestamp(obs.annotations, ann.FREEZE)
    old = obs.claim(anchor) if anchor else None
    deleting_for = now - old.deleting_at if old is not None and old.deleting_at else None
    stuck = (
        obs.annotations.get(ann.ACTIVE_ROTATION_STATE) == ann.MIRROR_DRAINING
        and deleting_for is not None
        and deleting_for > p.policy.drain_bound
    )
    report = PoolReport(
        pool=obs.name,
        governance=gov,
        anchor=anchor,
        window_active=p.policy.schedule.in_window(now),
        freeze_until=freeze if freeze is not None and freeze > now else None,
        derivation=derivation,
        census=census,
        short_lead=short,
        drain_stuck=stuck,
        retry_count=p.census.retry_count(),
        estimates=checks,
    )
    return report, actions


def _estimate_checks(p: Pass, derivation: Derivation) -> tuple[EstimateCheck, ...]:
    surge = p.policy.written.surge
    pairs = (
        ("provisioning", derivation.provisioning_estimate, surge.provisioning_estimate),
        ("drain", derivation.drain_estimate, surge.drain_estimate),
    )
    out = []
    for kind, resolved, explicit in pairs:
        samples = read_samples(p.obs.annotations, KEYS[kind])
        check = check_estimate(kind, resolved, explicit is not None, samples)
        if check is not None:
            out.append(check)
    return tuple(out)
