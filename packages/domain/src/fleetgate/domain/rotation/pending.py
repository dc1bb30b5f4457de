"""A surge rotation before its old claim is deleted (spec §7.4), its failure and its retry (§7.6).

Everything here is re-asserted on every pass from what the cluster shows, so a controller that
died after any single write picks up exactly where it stopped.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from fleetgate.domain.durations import format_duration
from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.actions import (
    PROVISION_SURGE,
    ROTATE_NODE,
    Action,
    AnnotateClaim,
    AnnotatePool,
    Announce,
    CountCompletion,
    CreatePlaceholder,
    DeleteClaim,
    Log,
    ObserveDuration,
)
from fleetgate.domain.rotation.cluster import NodeClaimView, NodeView, PodView
from fleetgate.domain.rotation.constants import LONG_REQUEUE, SHORT_REQUEUE
from fleetgate.domain.rotation.context import CLEAR_ANCHOR, Pass
from fleetgate.domain.rotation.disruption import node_limit_reached
from fleetgate.domain.rotation.estimates import OBSERVED_PROVISIONING, append_sample
from fleetgate.domain.rotation.ledger_gate import LedgerHold, drain_hold, held_event
from fleetgate.domain.rotation.markers import freeze
from fleetgate.domain.rotation.placeholder import Clamp, build_placeholder
from fleetgate.domain.rotation.selection import retry_backoff

Outcome = tuple[list[Action], "datetime | None"]


def surge_claim(p: Pass, claim: NodeClaimView, started_at: datetime | None) -> str | None:
    """The claim provisioned for this surge: persisted, or found (placeholder's node, else the
    earliest claim created after the attempt started that has no node yet)."""
    persisted = claim.annotations.get(ann.SURGE_CLAIM)
    if persisted:
        return persisted
    placeholder = _placeholder(p, claim.name)
    if placeholder is not None and placeholder.node_name:
        owner = p.obs.claim_on(placeholder.node_name)
        if owner is not None and owner.name != claim.name:
            return owner.name
    if started_at is None:
        return None
    fresh = sorted(
        (
            c
            for c in p.census.unbound_claims()
            if c.name != claim.name and c.node_name is None and c.created_at > started_at
        ),
        key=lambda c: (c.created_at, c.name),
    )
    return fresh[0].name if fresh else None


def _placeholder(p: Pass, name: str) -> PodView | None:
    return next((pod for pod in p.obs.placeholders if pod.labels.get(ann.SURGE_FOR) == name), None)


Built = tuple[CreatePlaceholder, Clamp]
"""A claim's placeholder and the clamp verdicts of its sizing (``build``)."""


def build(p: Pass, claim: NodeClaimView) -> Built:
    """The placeholder for ``claim``, avoiding every host whose claim is also due."""
    due_hosts = p.census.due_hosts()
    avoid = [claim.node_name, *due_hosts] if claim.node_name else due_hosts
    spec, sized = build_placeholder(
        p.obs,
        claim,
        namespace=p.config.namespace,
        required_keys=p.policy.required_keys,
        preferred_keys=p.policy.preferred_keys,
        avoid_hosts=avoid,
    )
    return CreatePlaceholder(spec), sized


def headroom_ok(p: Pass, claim: NodeClaimView, built: Built | None = None) -> bool:
    """Whether the pool's limits leave room for the surge node (spec §6 "Headroom").

    ``limits.nodes`` needs room for one more node (Karpenter counts nodes in
    ``status.resources.nodes``); every other limit needs room for the placeholder's requests.
    ``built`` is ``build(p, claim)`` when the caller has it already.
    """
    if node_limit_reached(p.obs):
        return False
    create, _ = built or build(p, claim)
    for name, want in create.spec.requests.items():
        if name in p.obs.limits and want > p.obs.limits[name] - p.obs.resources.get(name, 0):
            return False
    return True


def pending(p: Pass, claim: NodeClaimView, built: Built | None = None) -> Outcome:
    """One pass of a pending surge rotation (§7.4). ``built`` is the claim's placeholder when
    the caller built it already (for the headroom check of this pass: the placeholder reads
    the claim's node, Pods and place, none of which the start's writes change). With the
    ledger's plans (``p.relocation``), gate 9 holds the drain until the old node's plan fits.

    In order: a claim being deleted ends the rotation; one past readyTimeout fails it;
    otherwise the old claim is held (pending, cordoned, frozen), and the surge moves on as far
    as it can: placeholder asked for, scheduled, its node ready, the old node's placements with
    room to go (ledger_gate.py), then the old claim drained."""
    if claim.deleting:  # Karpenter (or someone) is deleting it: the rotation is moot
        return _aborted(p, claim.name), None
    recorded = ann.read_timestamp(claim.annotations, ann.STARTED_AT)
    started_at = recorded if recorded is not None else p.now
    if p.now - started_at > p.policy.ready_timeout:
        return fail(p, claim, started_at)
    actions = _hold_old_claim(p, claim, started_at, restamp=recorded is None)
    freeze_until = ann.read_timestamp(p.obs.annotations, ann.FREEZE)
    if freeze_until is not None and p.now < freeze_until:
        held = Log(
            "pool frozen; holding the pending rotation", {"nodeclaim": claim.name}, dedup="frozen"
        )
        return [*actions, held], p.now + LONG_REQUEUE
    placeholder = _placeholder(p, claim.name)
    if placeholder is None:
        actions += _ask_for_surge(p, claim, built)
    elif (host := _ready_host(p, claim, placeholder)) is None:
        actions += _unschedulable(claim.name, placeholder)
    elif p.relocation is not None and host.name not in p.relocation:
        actions += _awaiting_surge(claim.name, host)
    elif (hold := drain_hold(p, claim)) is not None:
        actions += _drain_held(hold, host)
    else:
        actions += _surge_ready(p, claim.name, host, started_at)
    return actions, p.now + SHORT_REQUEUE


def _awaiting_surge(name: str, host: NodeView) -> list[Action]:
    """Make-before-break for capacity: the surge node is Ready, but the node sync has not
    brought it into the ledger yet, and the drain is judged with it only once it is there (the
    next sync does it; the surge's readyTimeout bounds the wait)."""
    return [
        Log(
            "surge node ready; waiting for it to join the ledger before the drain",
            {"nodeclaim": name, "surgeNode": host.name},
            dedup=f"awaiting-ledger:{name}:{host.name}",
        )
    ]


def _drain_held(hold: LedgerHold, host: NodeView) -> list[Action]:
    """The surge is Ready but the old node's plan does not fit the ledger yet (the surge not
    yet in it, or not room enough, or no new node at all): wait, and say why."""
    return [
        held_event(hold),
        Log(
            "drain held: the node's ledger placements would not all find room",
            {
                "nodeclaim": hold.nodeclaim,
                "surgeNode": host.name,
                "stranded": len(hold.verdict.stranded),
            },
            dedup=f"drain-held:{hold.nodeclaim}:{len(hold.verdict.stranded)}",
        ),
    ]


def _aborted(p: Pass, name: str) -> list[Action]:
    """The pending claim is being deleted: release the surge and end the rotation."""
    return [
        *p.release(name),
        CountCompletion("expired"),
        AnnotateClaim(
            name,
            {
                ann.CLAIM_STATE: ann.ClaimState.EXPIRED.value,
                ann.STARTED_AT: None,
                ann.SURGE_CLAIM: None,
            },
        ),
        AnnotatePool(p.obs.name, dict(CLEAR_ANCHOR)),
        Log("rotation aborted: the claim is being deleted", {"nodeclaim": name}),
    ]


def _hold_old_claim(
    p: Pass, claim: NodeClaimView, started_at: datetime, restamp: bool
) -> list[Action]:
    """Keep the old claim pending (since ``started_at``), its node cordoned and frozen, and
    the surge's claim recorded once found."""
    patch: dict[str, str | None] = {}
    if claim.annotations.get(ann.CLAIM_STATE) != ann.ClaimState.PENDING:
        patch[ann.CLAIM_STATE] = ann.ClaimState.PENDING.value
    if restamp:
        patch[ann.STARTED_AT] = p.stamp
    node = p.obs.node(claim.node_name)
    actions: list[Action] = freeze(node, claim.name, cordon=True) if node is not None else []
    found = surge_claim(p, claim, started_at)
    if found and claim.annotations.get(ann.SURGE_CLAIM) != found:
        patch[ann.SURGE_CLAIM] = found
    return [AnnotateClaim(claim.name, patch), *actions] if patch else actions


def _ask_for_surge(p: Pass, claim: NodeClaimView, built: Built | None) -> list[Action]:
    """Create the placeholder Pod that makes Karpenter provision the surge node (once the
    old claim has a node to keep it away from)."""
    if claim.node_name is None:
        return []
    create, sized = built or build(p, claim)
    return [create, *_clamp_events(p.obs.name, claim.name, sized)]


def _ready_host(p: Pass, claim: NodeClaimView, placeholder: PodView) -> NodeView | None:
    """The surge node, once the placeholder runs on a Ready node of the pool other than the
    old claim's (None: not yet)."""
    if placeholder.phase != "Running" or placeholder.deleting or placeholder.node_name is None:
        return None
    if placeholder.node_name == claim.node_name:
        return None
    host = p.obs.node(placeholder.node_name)
    if host is None or not host.ready or host.labels.get(ann.KARPENTER_NODEPOOL) != p.obs.name:
        return None
    return host


def _unschedulable(name: str, placeholder: PodView) -> list[Action]:
    """Say why the placeholder waits, when the scheduler said why."""
    if not placeholder.unschedulable_reason:
        return []
    text = f"{placeholder.unschedulable_reason}: {placeholder.unschedulable_message or ''}"
    return [
        Log(
            "surge placeholder is not schedulable",
            {"nodeclaim": name, "reason": text},
            dedup=f"unschedulable:{text}",
        ),
        Announce(
            "SurgeUnschedulable",
            text,
            name,
            "NodeClaim",
            warning=True,
            dedup=f"SurgeUnschedulable:{name}:{text}",
            action=PROVISION_SURGE,
        ),
    ]


def _surge_ready(p: Pass, name: str, host: NodeView, started_at: datetime) -> list[Action]:
    """The surge node is ready: the old claim may go (the pool's mirror says draining)."""
    wait = p.now - started_at
    pool_patch: dict[str, str | None] = {ann.ACTIVE_ROTATION_STATE: ann.MIRROR_DRAINING}
    if ann.DRAINING_AT not in p.obs.annotations:
        pool_patch[ann.DRAINING_AT] = p.stamp
    if ann.SURGE_WAIT not in p.obs.annotations:
        pool_patch[ann.SURGE_WAIT] = format_duration(wait)
        pool_patch[OBSERVED_PROVISIONING] = append_sample(
            p.obs.annotations, OBSERVED_PROVISIONING, wait
        )
    return [
        *freeze(host, name, cordon=False),
        AnnotatePool(p.obs.name, pool_patch),
        AnnotateClaim(name, {ann.CLAIM_STATE: ann.ClaimState.DRAINING.value}),
        ObserveDuration("surge_wait", wait.total_seconds()),
        Log(
            "surge node ready",
            {"nodeclaim": name, "surgeNode": host.name, "surgeWait": format_duration(wait)},
        ),
        Log("drain started", {"nodeclaim": name, "mode": "surge"}),
        DeleteClaim(name),
    ]


def _clamp_events(pool: str, name: str, sized: Clamp) -> list[Action]:
    out: list[Action] = []
    for resource in sized.refused:
        out.append(
            Announce(
                "SurgeClampRefused",
                f"no room for {resource} on a fresh node beside "
                "its DaemonSets; keeping the full request (the surge will roll back)",
                name,
                "NodeClaim",
                warning=True,
                action=PROVISION_SURGE,
                related=("NodePool", pool),
            )
        )
    for resource in sized.clamped:
        out.append(
            Announce(
                "SurgeClamped",
                f"placeholder {resource} request clamped to {sized.requests[resource]}",
                name,
                "NodeClaim",
                action=PROVISION_SURGE,
                related=("NodePool", pool),
            )
        )
    for resource in sized.band_exceeded:
        out.append(
            Announce(
                "SurgeClampBandExceeded",
                f"clamping {resource} dropped more than the node/claim allocatable band",
                name,
                "NodeClaim",
                warning=True,
                action=PROVISION_SURGE,
                related=("NodePool", pool),
            )
        )
    return out


def _reapable(p: Pass, surge: NodeClaimView, started_at: datetime, placeholder: str) -> bool:
    if surge.created_at <= started_at:
        return False
    if surge.node_name is None:
        return True
    return all(
        pod.owner_kind == "DaemonSet" or pod.mirror or pod.phase in ("Succeeded", "Failed")
        for pod in p.obs.pods_on(surge.node_name)
        if pod.name != placeholder
    )


def fail(p: Pass, claim: NodeClaimView, started_at: datetime | None) -> Outcome:
    """readyTimeout exceeded: roll the surge back and fail the attempt (§7.6 failPending)."""
    # The placeholder goes first: while it is Pending, Karpenter would launch for it again.
    actions: list[Action] = p.release(claim.name)
    actions += _reap_surge(p, claim, started_at)
    count = ann.parse_retry_count(claim.annotations.get(ann.RETRY_COUNT)) + 1
    return actions + _failed(p, claim.name, count), p.now + LONG_REQUEUE


def _reap_surge(p: Pass, claim: NodeClaimView, started_at: datetime | None) -> list[Action]:
    """Delete the surge's claim when it came for this attempt and nothing but the placeholder
    and node-bound Pods ran there, and (gate 9) when what the ledger has placed on it since it
    joined could all move elsewhere: a surge that waited for room may have taken placements."""
    surge_name = surge_claim(p, claim, started_at)
    surge = p.obs.claim(surge_name) if surge_name else None
    if surge is None or started_at is None or surge.deleting:
        return []
    placeholder = _placeholder(p, claim.name)
    if not _reapable(p, surge, started_at, placeholder.name if placeholder else ""):
        return []
    if drain_hold(p, surge) is not None:
        return [
            Log(
                "surge kept: its ledger placements would have nowhere to go",
                {"nodeclaim": claim.name, "surge": surge.name},
                dedup=f"surge-kept:{surge.name}",
            )
        ]
    return [DeleteClaim(surge.name)]


def _failed(p: Pass, name: str, count: int) -> list[Action]:
    """Record the ``count``-th failure on the claim, say so, and clear the pool's anchor."""
    backoff_until = p.now + retry_backoff(p.policy.retry_backoff, count)
    return [
        CountCompletion("failure"),
        AnnotateClaim(
            name,
            {
                ann.CLAIM_STATE: ann.ClaimState.FAILED.value,
                ann.FAILED_AT: p.stamp,
                ann.RETRY_COUNT: str(count),
                ann.STARTED_AT: None,
                ann.SURGE_CLAIM: None,
            },
        ),
        Log(
            "rotation attempt failed",
            {
                "nodeclaim": name,
                "reason": "readyTimeout",
                "retryCount": count,
                "backoffUntil": ann.format_timestamp(backoff_until),
            },
        ),
        Announce(
            "RotationFailed",
            f"surge node not ready within readyTimeout "
            f"{format_duration(p.policy.ready_timeout)}; retry {count} after "
            f"{ann.format_timestamp(backoff_until)}",
            name,
            "NodeClaim",
            warning=True,
            action=ROTATE_NODE,
            related=("NodePool", p.obs.name),
        ),
        AnnotatePool(p.obs.name, {**CLEAR_ANCHOR, ann.LAST_FAILURE_AT: p.stamp}),
    ]


def advance_failed(p: Pass, claim: NodeClaimView, gate_open: bool) -> Outcome:
    """An anchored claim in ``failed``: retry it when allowed, else repair the torn write."""
    if claim.deleting:
        return [CountCompletion("expired"), AnnotatePool(p.obs.name, dict(CLEAR_ANCHOR))], None
    failed_at = ann.read_timestamp(claim.annotations, ann.FAILED_AT)
    count = ann.parse_retry_count(claim.annotations.get(ann.RETRY_COUNT))
    elapsed = failed_at is None or p.now - failed_at >= retry_backoff(p.policy.retry_backoff, count)
    built = build(p, claim) if gate_open and elapsed else None
    if built is not None and headroom_ok(p, claim, built):
        retried = _with(
            claim, {ann.CLAIM_STATE: ann.ClaimState.PENDING.value, ann.STARTED_AT: p.stamp}
        )
        actions: list[Action] = [
            AnnotateClaim(
                claim.name,
                {
                    ann.CLAIM_STATE: ann.ClaimState.PENDING.value,
                    ann.STARTED_AT: p.stamp,
                },
            )
        ]
        more, requeue = pending(p, retried, built)
        return actions + more, requeue
    last = ann.read_timestamp(p.obs.annotations, ann.LAST_FAILURE_AT)
    known = [t for t in (last, failed_at) if t is not None]
    repaired = max(known) if known else p.now
    patch = {**CLEAR_ANCHOR, ann.LAST_FAILURE_AT: ann.format_timestamp(repaired)}
    return [AnnotatePool(p.obs.name, patch)], p.now + LONG_REQUEUE


def _with(claim: NodeClaimView, patch: dict[str, str]) -> NodeClaimView:
    return replace(claim, annotations={**claim.annotations, **patch})
