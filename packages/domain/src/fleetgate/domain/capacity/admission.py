"""The admission, once: the sequence of guarded steps every store carries out.

1. Namespace side. The namespace's active, unexpired claim is charged (how: ``claim_charge``).
   The claim's *overage* — usage above its limit — is also charged to the cluster's unclaimed
   sums, under the cluster guard, so advisory claims cannot over-commit the cluster. A
   namespace without an active claim is charged to the cluster under its guard, and then the
   store says whether a claim committed meanwhile (the admission runs again if one did).
2. The node, under the node guard (schedulable, allocations, demand clause), adding the
   placement's demand charge.
3. The placement, under its ``(namespace, request_id)`` key; then the audit events.

A refusal at any step ends the sequence with ``Admission(denial=…)``; the store undoes the write
whole. The steps are the store's (``ports.AdmissionSteps``); the decisions are all here, so the
SQL ledger, its batches and the in-memory fake admit by one rule. Pure but for awaiting the
store.
"""

from __future__ import annotations

from fleetgate.domain.capacity.charging import ChargedClaim, charged_claim
from fleetgate.domain.capacity.claims import ClaimEnforcement, claim_charge
from fleetgate.domain.capacity.denials import Denial
from fleetgate.domain.capacity.model import Admission, AdmitRequest, Placement
from fleetgate.domain.ports import AdmissionSteps, Audit, PlacementByRequest


class ClaimAppeared(Exception):
    """A claim for the namespace committed while this admission waited for the cluster row.

    The admission cannot go on (it charged the unclaimed side for usage the claim has taken
    over): the store undoes it and runs it again, and then the claim is charged.
    """


async def admit(
    steps: AdmissionSteps,
    request: AdmitRequest,
    placement_id: str,
    enforcement: ClaimEnforcement,
    audit: Audit | None = None,
) -> Admission:
    """The whole admission over ``steps``: the Admission, or one with the refusal."""
    rule = claim_charge(enforcement, request.enforce)
    charged = await steps.charge_claim(request, rule)
    if charged is None:  # no active claim: the cluster's unclaimed side
        made = await steps.charge_cluster(request.resources, request.enforce)
        if made.denial is not None:
            return Admission(denial=made.denial)
        if await steps.claim_appeared(request.namespace):
            raise ClaimAppeared(request.namespace)
        bypassed = [made.bypassed] if made.bypassed else []
        return await after_claim(steps, request, placement_id, None, bypassed, audit)
    if charged.denial is not None:
        return Admission(denial=charged.denial)
    assert charged.row is not None  # a made claim charge reports the claim's counters
    claimed = charged_claim(charged.row, request, rule, charged.bypassed)
    return await after_claim(steps, request, placement_id, claimed, [], audit)


async def after_claim(
    steps: AdmissionSteps,
    request: AdmitRequest,
    placement_id: str,
    claimed: ChargedClaim | None,
    bypassed: list[Denial],
    audit: Audit | None,
) -> Admission:
    """The admission from the charged claim on: its overage, the node, the placement, the audit."""
    if claimed is not None:
        bypassed += [claimed.bypassed] if claimed.bypassed else []
        if not claimed.overage.is_zero():
            made = await steps.charge_cluster(claimed.overage, request.enforce)
            if made.denial is not None:
                return Admission(denial=made.denial)
            bypassed += [made.bypassed] if made.bypassed else []
    node = await steps.charge_node(request)
    if node.denial is not None:
        return Admission(denial=node.denial)
    bypassed += [node.bypassed] if node.bypassed else []
    return await record(steps, request, placement_id, claimed, bypassed, audit)


async def record(
    steps: AdmissionSteps,
    request: AdmitRequest,
    placement_id: str,
    claimed: ChargedClaim | None,
    bypassed: list[Denial],
    audit: Audit | None,
    *,
    inserted: bool = False,
) -> Admission:
    """Insert the placement (unless ``inserted`` already), then the audit; the Admission."""
    claim_id = None if claimed is None else claimed.claim_id
    placement = Placement(
        id=placement_id,
        namespace=request.namespace,
        node=request.node,
        resources=request.resources,
        demand=request.demand,
        admitted_at=steps.now,
        request_id=request.request_id,
        claim_id=claim_id,
    )
    if not inserted:
        await steps.insert_placement(placement)
    admission = Admission(
        placement=placement,
        node=await steps.charged_node(request.node),
        claim_id=claim_id,
        claim_over_limit=() if claimed is None else claimed.over_limit,
        bypassed=tuple(bypassed),
    )
    if audit is not None:
        await steps.record_events(audit(admission))
    return admission


async def seen(
    lookup: PlacementByRequest, namespace: str, request_id: str | None
) -> Placement | None:
    """The one answer to "was this request id seen": the placement under its key, or None.

    None for a request without an id, or one whose id has no placement (never admitted, or
    released since: its id is free again). Every layer that asks (the SQL ledger after its
    UNIQUE key fired, its group commit, the fake, the placement service) asks here.
    """
    if request_id is None:
        return None
    return await lookup(namespace, request_id)


async def replay_of(lookup: PlacementByRequest, request: AdmitRequest) -> Admission | None:
    """The earlier placement of a repeated request id, as a replay; None for a new request."""
    earlier = await seen(lookup, request.namespace, request.request_id)
    return None if earlier is None else Admission(placement=earlier, replayed=True)


__all__ = ["ClaimAppeared", "admit", "after_claim", "record", "replay_of", "seen"]
