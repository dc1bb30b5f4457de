"""The claim use cases: create, read, list, update and delete a namespace's capacity claim.

Every rule is the domain's and every transaction the ledger's (any CapacityLedger plugin); the
service adds the audit trail. Each write is reported as one event on the namespace, so a tenant
can read back what happened to its claim and why a request was refused.
"""

from __future__ import annotations

from typing import Any

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
from fleetgate.domain.ports import CapacityLedger, Clock, EventSink

CREATED = "namespace claim created"
UPDATED = "namespace claim updated"
DELETED = "namespace claim deleted"
REFUSED = "namespace claim refused"
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


def refusal_data(refusal: ClaimRefusal) -> dict[str, Any]:
    """A refusal as event data: the reason, the message, the dimensions."""
    return refusal.as_dict()


class ClaimService:
    """Claims through a CapacityLedger, with their audit events."""

    def __init__(self, ledger: CapacityLedger, clock: Clock, events: EventSink) -> None:
        self.ledger = ledger
        self.clock = clock
        self.events = events

    async def _report(
        self,
        kind: str,
        namespace: str,
        subject: str,
        level: Level,
        data: dict[str, Any],
        clamped: bool = False,
    ) -> None:
        now = self.clock.now()
        batch = [Event(kind, now, subject=subject, namespace=namespace, level=level, data=data)]
        if clamped:
            # A cluster counter had drifted below what the claim moved: a bug signal, loud.
            batch.append(
                Event(
                    CLAMPED,
                    now,
                    subject=subject,
                    namespace=namespace,
                    level=Level.ERROR,
                    data={"claim": subject},
                )
            )
        await self.events.emit(batch)

    async def _outcome(
        self, kind: str, namespace: str, subject: str, outcome: ClaimOutcome, extra: dict[str, Any]
    ) -> ClaimOutcome:
        if outcome.refusal is not None:
            data = {"operation": kind, **extra, **refusal_data(outcome.refusal)}
            await self._report(REFUSED, namespace, subject, Level.WARNING, data)
        elif outcome.claim is not None:
            data = {**claim_data(outcome.claim), **extra}
            data["expires_in_seconds"] = expires_in_seconds(outcome.claim, self.clock.now())
            await self._report(kind, namespace, outcome.claim.id, Level.INFO, data, outcome.clamped)
        return outcome

    async def create(self, request: ClaimRequest) -> ClaimOutcome:
        """Reserve capacity for a namespace (its current usage moves into the claim)."""
        outcome = await self.ledger.create_claim(request)
        extra = {
            "requested": request.limit.as_dict(),
            "requested_expires_in_seconds": request.expires_in_seconds,
        }
        return await self._outcome(CREATED, request.namespace, request.namespace, outcome, extra)

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
        outcome = await self.ledger.update_claim(claim_id, update, namespace=namespace)
        owner = namespace or (outcome.claim.namespace if outcome.claim else None)
        if owner is None:  # refused before we learnt whose claim it is: look it up
            found = await self.ledger.claim(claim_id)
            owner = found.namespace if found else ""
        extra = {"fields": sorted(update.fields)}
        return await self._outcome(UPDATED, owner, claim_id, outcome, extra)

    async def delete(self, claim_id: str, namespace: str | None = None) -> ClaimDeletion:
        """Delete a claim; its usage goes back to the unclaimed side. Idempotent."""
        deletion = await self.ledger.delete_claim(claim_id, namespace=namespace)
        if deletion.deleted and deletion.claim is not None:
            data = {**claim_data(deletion.claim), "returned": deletion.returned.as_dict()}
            await self._report(
                DELETED, deletion.claim.namespace, claim_id, Level.INFO, data, deletion.clamped
            )
        return deletion


__all__ = ["CLAMPED", "CREATED", "DELETED", "REFUSED", "UPDATED", "ClaimService"]
