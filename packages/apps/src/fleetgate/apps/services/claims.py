"""The claim use cases: create, read, list, update and delete a namespace's capacity claim.

Every rule is the domain's and every transaction the ledger's (any CapacityLedger plugin); the
service adds the audit trail. Each write is reported as one event on the namespace, so a tenant
can read back what happened to its claim and why a request was refused. A change's events commit
in its own transaction (the ledger's ``audit``); a refusal's are delivered best-effort.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fleetgate.apps.eventsink import with_request_id
from fleetgate.apps.services.audit import AuditEvents, Trail
from fleetgate.domain.capacity.claims import (
    Claim,
    ClaimDeletion,
    ClaimOutcome,
    ClaimRefusal,
    ClaimRequest,
    ClaimUpdate,
    expires_in_seconds,
)
from fleetgate.domain.events import Event, Level
from fleetgate.domain.ports import ClaimBook, Clock, EventSink

CREATED = "namespace claim created"
UPDATED = "namespace claim updated"
DELETED = "namespace claim deleted"
REFUSED = "namespace claim refused"
EXPIRED = "namespace claim expired"
CLAMPED = "capacity counter clamped at zero"


def claim_data(claim: Claim) -> dict[str, Any]:
    """A claim's figures as event data: limits, usage, expiry."""
    return {
        "claim": claim.id,
        "limit": claim.limit.as_dict(),
        "used": claim.used.as_dict(),
        "state": claim.state.value,
        "expires_at": claim.expires_at.isoformat(),
    }


def expired_event(claim: Claim, at: datetime) -> Event:
    """A claim's expiry, stored at ``at`` (by a reconcile pass, or by a write that found it due)."""
    data = {
        "claim": claim.id,
        "limit": claim.limit.as_dict(),
        "used": claim.used.as_dict(),
        "expires_at": claim.expires_at.isoformat(),
    }
    return Event(EXPIRED, at, subject=claim.id, namespace=claim.namespace, data=data)


def refusal_data(refusal: ClaimRefusal) -> dict[str, Any]:
    """A refusal as event data: the reason, the message, the dimensions."""
    return refusal.as_dict()


class ClaimService:
    """Claims through a CapacityLedger, with their audit events."""

    def __init__(self, ledger: ClaimBook, clock: Clock, events: EventSink) -> None:
        self.ledger = ledger
        self.clock = clock
        self.events = events
        self._event = AuditEvents(clock)

    def _events(
        self,
        kind: str,
        namespace: str,
        subject: str,
        level: Level,
        data: dict[str, Any],
        clamped: bool = False,
    ) -> list[Event]:
        batch = [self._event(kind, subject, namespace, level, **data)]
        if clamped:
            # A cluster counter had drifted below what the claim moved: a bug signal, loud.
            batch.append(self._event(CLAMPED, subject, namespace, Level.ERROR, claim=subject))
        return batch

    def _changed(
        self, kind: str, namespace: str | None, outcome: ClaimOutcome, extra: dict[str, Any]
    ) -> list[Event]:
        """What a create or update commits with it: the expiry of a due claim it stored, if any,
        then its own event; a refusal's is not among them (it changed nothing else)."""
        now = self.clock.now()
        expiry = (
            []
            if outcome.expired is None
            else [with_request_id(expired_event(outcome.expired, now))]
        )
        if outcome.claim is None:
            return expiry
        data = {**claim_data(outcome.claim), **extra}
        data["expires_in_seconds"] = expires_in_seconds(outcome.claim, now)
        owner = namespace or outcome.claim.namespace
        changed = self._events(kind, owner, outcome.claim.id, Level.INFO, data, outcome.clamped)
        return expiry + changed

    async def _outcome(
        self,
        kind: str,
        namespace: str,
        subject: str,
        outcome: ClaimOutcome,
        extra: dict[str, Any],
        trail: Trail[ClaimOutcome],
    ) -> ClaimOutcome:
        # What was written with the change (an expiry even under a refusal), emitted now only
        # to the other sinks; a refusal itself changed nothing: reported best-effort.
        written = trail.delivered(outcome)
        if written:
            await self.events.emit(written)
        if outcome.refusal is not None:
            data = {"operation": kind, **extra, **refusal_data(outcome.refusal)}
            await self.events.emit(self._events(REFUSED, namespace, subject, Level.WARNING, data))
        return outcome

    async def create(self, request: ClaimRequest) -> ClaimOutcome:
        """Reserve capacity for a namespace (its current usage moves into the claim)."""
        ns = request.namespace
        extra = {
            "requested": request.limit.as_dict(),
            "requested_expires_in_seconds": request.expires_in_seconds,
        }
        trail = Trail[ClaimOutcome](lambda outcome: self._changed(CREATED, ns, outcome, extra))
        outcome = await self.ledger.create_claim(request, audit=trail.events_of)
        return await self._outcome(CREATED, ns, ns, outcome, extra, trail)

    async def claim(self, claim_id: str, namespace: str | None = None) -> Claim | None:
        """One claim with its effective state, or None (also for another namespace's claim)."""
        return await self.ledger.claim(claim_id, namespace=namespace)

    async def claims(self, namespace: str | None = None) -> list[Claim]:
        """Claims (expired ones included), oldest first."""
        return await self.ledger.claims(namespace)

    async def update(
        self, claim_id: str, update: ClaimUpdate, namespace: str | None = None
    ) -> ClaimOutcome:
        """Grow (an admission), shrink (down to usage) or re-date a claim."""
        extra = {"fields": sorted(update.fields)}
        trail = Trail[ClaimOutcome](
            lambda outcome: self._changed(UPDATED, namespace, outcome, extra)
        )
        outcome = await self.ledger.update_claim(
            claim_id, update, namespace=namespace, audit=trail.events_of
        )
        owner = namespace or (outcome.claim.namespace if outcome.claim else None)
        if owner is None:  # refused before we learnt whose claim it is: look it up
            found = await self.ledger.claim(claim_id)
            owner = found.namespace if found else ""
        return await self._outcome(UPDATED, owner, claim_id, outcome, extra, trail)

    async def delete(self, claim_id: str, namespace: str | None = None) -> ClaimDeletion:
        """Delete a claim; its usage goes back to the unclaimed side. Idempotent."""
        trail = Trail(self._deleted)
        deletion = await self.ledger.delete_claim(
            claim_id, namespace=namespace, audit=trail.events_of
        )
        events = trail.delivered(deletion)
        if events:
            # Written with the deletion; emitted now only to the other sinks.
            await self.events.emit(events)
        return deletion

    def _deleted(self, deletion: ClaimDeletion) -> list[Event]:
        """What a deletion commits with it: none when there was nothing to delete."""
        if not deletion.deleted or deletion.claim is None:
            return []
        claim = deletion.claim
        data = {**claim_data(claim), "returned": deletion.returned.as_dict()}
        return self._events(DELETED, claim.namespace, claim.id, Level.INFO, data, deletion.clamped)


__all__ = [
    "CLAMPED",
    "CREATED",
    "DELETED",
    "EXPIRED",
    "REFUSED",
    "UPDATED",
    "ClaimService",
    "expired_event",
]
