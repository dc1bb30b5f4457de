"""API bearer tokens: the stored record, and the one-way digest kept instead of the secret.

A token's secret is shown to its holder once, when it is created; fleetgate keeps only
``digest(secret)``. The secret is a high-entropy random string (never a password), so one round of
SHA-256 is enough: there is nothing to brute-force that a slow hash would protect.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import datetime
from typing import Final

#: Every secret fleetgate issues starts with this, so a leaked one is easy to recognise in logs.
SECRET_PREFIX: Final = "fgt_"
#: Length of a digest: 64 lowercase hex characters (SHA-256).
DIGEST_LENGTH: Final = 64


@dataclass(frozen=True)
class ApiToken:
    """A stored namespace token: who it acts for, never its secret."""

    id: str
    namespace: str
    created_at: datetime
    revoked_at: datetime | None = None

    @property
    def active(self) -> bool:
        """True until the token is revoked."""
        return self.revoked_at is None


def digest(secret: str) -> str:
    """The digest stored for ``secret``: SHA-256, lowercase hex."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def matches(secret: str, stored_digest: str) -> bool:
    """True when ``secret`` hashes to ``stored_digest``, compared in constant time."""
    return hmac.compare_digest(digest(secret), stored_digest)


def same_secret(given: str, expected: str) -> bool:
    """Compare two secrets in constant time (for the configured admin token)."""
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))
