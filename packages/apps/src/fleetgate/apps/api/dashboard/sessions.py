"""Server-side sessions of the dashboard: the cookie holds an opaque id, never the admin token.

Signing in with the admin token (``/?token=…`` or ``/whatif?token=…``) creates a session: a
random id mapped, in this process, to the principal (the admin) and the digest of the token it
was opened with. A session ends when it expires (``TTL`` after sign-in), when it is revoked, or
when the admin token it was opened with is no longer the admin token (a new ``up`` run, a rotated
token): it is checked against the current token on every request. The store is bounded: past
``MAX_SESSIONS`` the oldest session is dropped, so repeated sign-ins cannot grow it without end.
The dashboard runs in one process (``fleetgate up``), so an in-memory map is the whole store.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from fleetgate.domain import tokens

TTL_SECONDS = 12 * 3600.0
"""A session lasts half a day of real time; then the link (or the form) signs in again."""
MAX_SESSIONS = 256


@dataclass(frozen=True)
class Session:
    """One signed-in browser: who it is and until when (``expires`` on the store's clock)."""

    principal: str
    token_digest: str
    expires: float


class Sessions:
    """Opaque session ids mapped to principals, expiring, revoked with their token."""

    def __init__(
        self,
        ttl: float = TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        limit: int = MAX_SESSIONS,
    ) -> None:
        if ttl <= 0 or limit < 1:
            raise ValueError("ttl and limit must be positive")
        self.ttl, self._clock, self._limit = ttl, clock, limit
        self._by_id: OrderedDict[str, Session] = OrderedDict()

    def open(self, token: str, principal: str = "admin") -> str:
        """A new session for a caller who proved ``token``; returns its id (the cookie value)."""
        self._drop_expired()
        while len(self._by_id) >= self._limit:
            self._by_id.popitem(last=False)
        session_id = secrets.token_urlsafe(32)
        self._by_id[session_id] = Session(principal, tokens.digest(token), self._clock() + self.ttl)
        return session_id

    def principal(self, session_id: str | None, current_token: str | None) -> str | None:
        """Who the session ``session_id`` is, if it is live and ``current_token`` opened it."""
        if not session_id or current_token is None:
            return None
        session = self._by_id.get(session_id)
        if session is None:
            return None
        if session.expires <= self._clock() or not secrets.compare_digest(
            session.token_digest, tokens.digest(current_token)
        ):
            del self._by_id[session_id]
            return None
        return session.principal

    def close(self, session_id: str | None) -> None:
        """End one session (signing out)."""
        if session_id:
            self._by_id.pop(session_id, None)

    def revoke(self, token: str) -> int:
        """End every session opened with ``token``; returns how many ended."""
        digest = tokens.digest(token)
        gone = [k for k, s in self._by_id.items() if secrets.compare_digest(s.token_digest, digest)]
        for key in gone:
            del self._by_id[key]
        return len(gone)

    def __len__(self) -> int:
        self._drop_expired()
        return len(self._by_id)

    def _drop_expired(self) -> None:
        now = self._clock()
        for key in [k for k, s in self._by_id.items() if s.expires <= now]:
            del self._by_id[key]


__all__ = ["MAX_SESSIONS", "TTL_SECONDS", "Session", "Sessions"]
