"""Namespace API tokens (the admin's ``/v1/admin/namespaces/{ns}/tokens``): create and revoke.

Each write commits its one audit event in its own transaction (the store's ``audit``). The event
names the namespace and the token's id only: the secret is shown to its holder once and never
kept, and its digest, which would let anyone holding the table test guesses offline, is not
repeated outside ``api_tokens``.
"""

from __future__ import annotations

from fleetgate.apps.services.audit import AuditEvents, Trail
from fleetgate.domain.events import Event
from fleetgate.domain.ports import Clock, EventSink, TokenStore
from fleetgate.domain.tokens import ApiToken

CREATED = "token created"
REVOKED = "token revoked"


class TokenService:
    """Creates and revokes namespace tokens, each with its audit event in the same transaction."""

    def __init__(self, store: TokenStore, clock: Clock, events: EventSink) -> None:
        self._store = store
        self._clock = clock
        self._events = events
        self._event = AuditEvents(clock)

    async def create(self, namespace: str, token_digest: str) -> ApiToken:
        """Store a new active token of ``namespace`` by the digest of its secret."""
        trail = Trail[ApiToken](lambda token: [self._about(CREATED, token.namespace, token.id)])
        token = await self._store.create_token(
            namespace, token_digest, self._clock.now(), audit=trail.events_of
        )
        await self._events.emit(trail.delivered(token))
        return token

    async def revoke(self, namespace: str, token_id: str) -> bool:
        """Revoke an active token of ``namespace``; False (and no event) if there is none."""

        def revoked(done: bool) -> list[Event]:
            return [self._about(REVOKED, namespace, token_id)] if done else []

        trail = Trail[bool](revoked)
        done = await self._store.revoke_token(
            namespace, token_id, self._clock.now(), audit=trail.events_of
        )
        await self._events.emit(trail.delivered(done))
        return done

    def _about(self, kind: str, namespace: str, token_id: str) -> Event:
        return self._event(kind, token_id, namespace, token=token_id)


__all__ = ["CREATED", "REVOKED", "TokenService"]
