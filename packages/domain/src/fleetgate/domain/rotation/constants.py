"""The fixed numbers of rotation (spec §2.2). They are not configurable on purpose."""

from __future__ import annotations

from datetime import timedelta

__all__ = [
    "BACKOFF_CAP_SHIFT",
    "BUFFER",
    "DRAIN_ESTIMATE_DEFAULT",
    "DRAIN_FALLBACK",
    "FAILURE_PAUSE_FLOOR",
    "HARD_CAP",
    "LONG_REQUEUE",
    "PROVISIONING_ESTIMATE_DEFAULT",
    "SHORT_REQUEUE",
]

SHORT_REQUEUE = timedelta(seconds=30)
"""How soon the controller looks again while a rotation is moving."""
LONG_REQUEUE = timedelta(minutes=1)
"""How soon the controller looks again when nothing is moving."""
BUFFER = 4 * SHORT_REQUEUE
"""Slack added to the deadline bound: a few controller passes of observation lag (2m)."""
DRAIN_FALLBACK = timedelta(hours=1)
"""The drain bound assumed when a pool or claim sets no terminationGracePeriod."""
DRAIN_ESTIMATE_DEFAULT = timedelta(minutes=10)
"""Prior for how long a healthy drain takes (capped at tGP) when drainEstimate is unset."""
PROVISIONING_ESTIMATE_DEFAULT = timedelta(minutes=5)
"""Prior for how long a surge node takes to be Ready (capped at readyTimeout) when unset."""
FAILURE_PAUSE_FLOOR = timedelta(minutes=10)
"""The least failurePause resolves to when unset: max(this, cooldownAfter)."""
HARD_CAP = timedelta(days=21)
"""EKS Auto Mode's limit on expireAfter + terminationGracePeriod."""
BACKOFF_CAP_SHIFT = 3
"""Retry backoff doubles at most this many times (8x the base)."""
MAX_POOL_NODES = 1_000_000
"""The most NodeClaims a pool is checked with (N): far past any pool Karpenter runs, so a count
written by mistake (99999999999999999999999) is refused wherever N is given, CLI or API."""
FIRST_YEAR, LAST_YEAR = 2000, 2999
"""The years a simulation's instants may be written in (UTC), at every entry point: the fleet
file's timestamps, ``fleetgate simulate --from/--to`` and the API's span."""
