"""Namespace tokens (in-memory ledger): each write commits one event naming the token by id."""

from __future__ import annotations

from fleetgate.adapters.clock import VirtualClock
from fleetgate.apps.services import tokens as svc
from fleetgate.apps.services.tokens import TokenService
from fleetgate.domain.tokens import digest
from tests.fakes.ledger import InMemoryLedger


async def test_create_and_revoke_each_record_one_event_without_the_digest(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    tokens = TokenService(ledger, clock, ledger.event_sink())
    secret_digest = digest("fgt_service")
    token = await tokens.create("team-a", secret_digest)
    assert token.active and token.created_at == clock.now()
    assert await tokens.revoke("team-a", token.id)
    assert not await tokens.revoke("team-a", token.id)  # no active token left: no event
    assert not await tokens.revoke("team-b", token.id)  # another namespace's: none either
    recorded = [r.event for r in await ledger.events()]
    assert [(e.kind, e.subject, e.namespace, e.data) for e in recorded] == [
        (svc.CREATED, token.id, "team-a", {"token": token.id}),
        (svc.REVOKED, token.id, "team-a", {"token": token.id}),
    ]
    assert all(secret_digest not in repr(e) for e in recorded)
    (listed,) = await ledger.list_tokens("team-a")
    assert listed.revoked_at == clock.now()
