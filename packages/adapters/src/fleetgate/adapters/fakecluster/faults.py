"""Faults the fake cluster can exhibit, and the crash a test injects into a controller."""

from __future__ import annotations

from dataclasses import dataclass, field


class ControllerCrash(BaseException):
    """Raised by a gateway write when a crash was injected: the write happened, the process "died".

    A ``BaseException`` so that a controller's ``except Exception`` cannot swallow it, exactly as
    it could not survive a real SIGKILL.
    """


@dataclass
class Faults:
    """The active faults. Pools are named; an empty set means "no pool"."""

    # Claims launched for these pools never become Ready (provisioning hangs).
    provisioning_never_completes: set[str] = field(default_factory=set)
    # No new claim can be launched for these pools (the cloud has no capacity).
    capacity_shortage: set[str] = field(default_factory=set)
    # Drains of these claims never finish on their own: only the claim's tGP ends them.
    stuck_drains: set[str] = field(default_factory=set)
    # Every drain in these pools is stuck.
    stuck_drain_pools: set[str] = field(default_factory=set)
    # Drains of these claims never finish at all, not even at tGP (a finalizer that never clears).
    stuck_forever: set[str] = field(default_factory=set)
    # Writes left before the injected crash (None: no crash armed).
    crash_after_writes: int | None = None
    # The next this many RotationPolicy status writes lose a conflict (return False).
    policy_status_conflicts: int = 0
