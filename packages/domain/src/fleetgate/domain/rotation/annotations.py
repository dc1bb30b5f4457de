"""Every annotation and label rotation reads or writes, and how their values are read.

All rotation state lives on the cluster objects (spec §7.1), so these keys are the controller's
whole memory: a restarted controller continues from them. fleetgate's own keys use the prefix
``fleetgate.io/``; the ``karpenter.sh/`` keys belong to Karpenter and keep Karpenter's meaning.

Timestamps are RFC3339 written at second precision; a value that is empty or does not parse is
treated as absent (never as an error), because an operator or a torn write may leave anything there.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum
from functools import lru_cache

__all__ = [
    "ACTIVE_ROTATION",
    "ACTIVE_ROTATION_STATE",
    "CLAIM_STATE",
    "CORDONED",
    "DO_NOT_DISRUPT_OWNED",
    "DRAINING_AT",
    "FAILED_AT",
    "FREEZE",
    "KARPENTER_DO_NOT_DISRUPT",
    "KARPENTER_NODEPOOL",
    "LAST_FAILURE_AT",
    "LAST_ROTATION_AT",
    "MIRROR_DRAINING",
    "MODE_FORCEFUL_FALLBACK",
    "PREFIX",
    "RETRY_COUNT",
    "ROTATION_MODE",
    "STARTED_AT",
    "SURGE_CLAIM",
    "SURGE_FOR",
    "SURGE_WAIT",
    "TRUE",
    "ClaimState",
    "format_timestamp",
    "parse_retry_count",
    "parse_timestamp",
    "read_timestamp",
]

PREFIX = "fleetgate.io/"
TRUE = "true"

# --- NodePool ---------------------------------------------------------------------------------
ACTIVE_ROTATION = PREFIX + "active-rotation"
"""Name of the NodeClaim being rotated: the anchor and serial gate (first written, last cleared)."""
ACTIVE_ROTATION_STATE = PREFIX + "active-rotation-state"
"""Mirror of the old claim's state on the pool; only ever ``draining``."""
DRAINING_AT = PREFIX + "draining-at"
"""RFC3339 instant the old claim was deleted (write-once)."""
SURGE_WAIT = PREFIX + "surge-wait"
"""Duration string: how long the surge node took to be ready (write-once; absent surge-less)."""
ROTATION_MODE = PREFIX + "rotation-mode"
"""``forceful-fallback`` for a surge-less rotation; absent means surge."""
LAST_ROTATION_AT = PREFIX + "last-rotation-at"
"""RFC3339 instant of the last successful rotation (start gate ``cooldownAfterSuccess``)."""
LAST_FAILURE_AT = PREFIX + "last-failure-at"
"""RFC3339 instant of the last failed surge (start gate ``failurePause``)."""
FREEZE = PREFIX + "freeze"
"""Operator-written RFC3339 instant; no rotation starts before it (start gate ``frozen``)."""

MIRROR_DRAINING = "draining"
MODE_FORCEFUL_FALLBACK = "forceful-fallback"

# --- old NodeClaim ----------------------------------------------------------------------------
CLAIM_STATE = PREFIX + "state"
"""The claim's rotation state, one of :class:`ClaimState` (absent = never picked)."""
STARTED_AT = PREFIX + "started-at"
"""RFC3339 instant the current surge attempt started (write-once per attempt)."""
FAILED_AT = PREFIX + "failed-at"
"""RFC3339 instant of the claim's last failed attempt (retry backoff runs from here)."""
RETRY_COUNT = PREFIX + "retry-count"
"""Decimal count of readyTimeout failures; +1 per failure, never reset."""
SURGE_CLAIM = PREFIX + "surge-claim"
"""Name of the NodeClaim provisioned for the surge, once known."""

# --- Nodes and the placeholder Pod ------------------------------------------------------------
SURGE_FOR = PREFIX + "surge-for"
"""On a node (annotation) and the placeholder Pod (label): the claim this surge serves."""
DO_NOT_DISRUPT_OWNED = PREFIX + "do-not-disrupt-owned"
"""Marks a ``karpenter.sh/do-not-disrupt`` that fleetgate set (so it may remove it, and so it is
not mistaken for an operator opt-out)."""
CORDONED = PREFIX + "cordoned"
"""Marks a cordon that fleetgate applied (so only fleetgate's cordons are lifted)."""

# --- Karpenter's own keys ---------------------------------------------------------------------
KARPENTER_DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
"""Karpenter's opt-out annotation; exactly ``"true"`` without our marker is an operator opt-out."""
KARPENTER_NODEPOOL = "karpenter.sh/nodepool"
"""Karpenter's label naming the NodePool of a NodeClaim, a Node or our placeholder Pod."""


class ClaimState(StrEnum):
    """Values of :data:`CLAIM_STATE` on an old NodeClaim."""

    PENDING = "pending"
    DRAINING = "draining"
    FAILED = "failed"
    EXPIRED = "expired"


_RFC3339 = re.compile(
    r"^(?P<base>\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2})(?:\.(?P<fraction>\d+))?"
    r"(?P<offset>[Zz]|[+-]\d{2}:\d{2})$"
)


def parse_timestamp(value: str | None) -> datetime | None:
    """Read an RFC3339 timestamp as an aware UTC datetime; empty or malformed gives None."""
    return _parse(value) if value else None


# A controller reads the same few annotations again on every pass: their instants are
# remembered (text in, an aware datetime out: both immutable, so a remembered one is the one
# computed).
@lru_cache(maxsize=4096)
def _parse(value: str) -> datetime | None:
    match = _RFC3339.match(value.strip())
    if match is None:
        return None
    offset = match["offset"].upper().replace("Z", "+00:00")
    # fromisoformat takes at most 6 fraction digits; RFC3339 allows any number.
    fraction = (match["fraction"] or "")[:6].ljust(6, "0")
    try:
        return datetime.fromisoformat(f"{match['base']}.{fraction}{offset}").astimezone(UTC)
    except ValueError:  # well-formed but not a real instant, e.g. month 13
        return None


def read_timestamp(annotations: Mapping[str, str], key: str) -> datetime | None:
    """The timestamp stored under ``key``, or None when it is absent, empty or malformed."""
    return parse_timestamp(annotations.get(key))


def format_timestamp(instant: datetime) -> str:
    """Write an instant as RFC3339 in UTC at second precision (``2024-01-03T02:00:00Z``)."""
    if instant.tzinfo is None:
        raise ValueError("format_timestamp: the instant must be timezone-aware")
    if instant.tzinfo is not UTC:
        instant = instant.astimezone(UTC)
    if instant.year < 1000:  # the C library's %Y does not pad such years; isoformat would
        return instant.strftime("%Y-%m-%dT%H:%M:%SZ")
    # The same text as the strftime above, without parsing a format on every call (a
    # controller pass writes several): ``…T02:00:00+00:00`` with its offset as ``Z``.
    return instant.isoformat(timespec="seconds")[:-6] + "Z"


def parse_retry_count(value: str | None) -> int:
    """Read a retry count; absent or malformed counts as 0 (spec §6: bad retry-count ⇒ 0)."""
    # Strictly ASCII digits, as the reference controller reads it: int() would also take
    # " 3", "1_0", "+3" and non-ASCII digits, which the reference counts as 0.
    if value is None or not (value.isascii() and value.isdigit()):
        return 0
    return int(value, 10)
