"""The demand spreader's arithmetic: the charge a placement adds and how it decays.

A new placement shows no load for minutes, so a burst would pile onto whichever node looks idle.
Each admission therefore adds ``cpus × demand_per_vcpu`` to the node's ``expected_demand``; the
charge decays linearly to zero over ``decay_seconds`` (by then real load is visible). A release
credits back what is left of its own charge, so churn leaves no residue.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

#: The smallest non-zero demand charge per vCPU a policy may set.
MIN_DEMAND_PER_VCPU = 1e-6


def demand_per_vcpu_problem(value: float) -> str | None:
    """Why ``value`` cannot be a charge per vCPU (None when it can), beyond being non-negative.

    A non-zero charge below ``MIN_DEMAND_PER_VCPU`` is meaningless as load, and a database's
    float arithmetic may underflow on it (PostgreSQL raises rather than round a product to 0).
    """
    if 0 < value < MIN_DEMAND_PER_VCPU:
        return f"must be 0 (off) or at least {MIN_DEMAND_PER_VCPU:g}"
    return None


@dataclass(frozen=True)
class DemandPolicy:
    """The spreader's knobs (capacity spec section 8). ``target_load <= 0`` turns it off."""

    target_load: float = 0.75
    demand_per_vcpu: float = 0.6
    decay_seconds: float = 600.0

    def __post_init__(self) -> None:
        for name in ("target_load", "demand_per_vcpu", "decay_seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{name}: must be a number, got {value!r}")
            if not math.isfinite(value):
                raise ValueError(f"{name}: must be finite, got {value!r}")
        if self.demand_per_vcpu < 0:
            raise ValueError(f"demand_per_vcpu: must not be negative, got {self.demand_per_vcpu}")
        problem = demand_per_vcpu_problem(self.demand_per_vcpu)
        if problem is not None:
            raise ValueError(f"demand_per_vcpu: {problem}, got {self.demand_per_vcpu}")
        if self.decay_seconds < 0:
            raise ValueError(f"decay_seconds: must not be negative, got {self.decay_seconds}")

    @property
    def enabled(self) -> bool:
        """Whether the demand clause is part of the node guard at all."""
        return self.target_load > 0


def charge(cpus: int, demand_per_vcpu: float) -> float:
    """The expected load a placement of ``cpus`` vCPUs adds to its node when admitted."""
    if cpus < 0:
        raise ValueError(f"cpus: must not be negative, got {cpus}")
    return cpus * demand_per_vcpu


def remaining(initial: float, age_seconds: float, decay_seconds: float) -> float:
    """What is left of a charge ``age_seconds`` after it was made: linear decay to zero.

    A negative age (the clock that stamped the placement ran ahead) counts as zero. A
    ``decay_seconds`` of zero disables the estimate: nothing is left at any age.
    """
    if decay_seconds <= 0:
        return 0.0
    age = max(0.0, age_seconds)
    return initial * max(0.0, 1.0 - age / decay_seconds)


def age_seconds(admitted_at: datetime, now: datetime) -> float:
    """Seconds from ``admitted_at`` to ``now`` (negative if ``now`` is earlier)."""
    return (now - admitted_at).total_seconds()


def decayed_total(charges: list[tuple[float, float]], decay_seconds: float) -> float:
    """Σ remaining over ``(initial, age_seconds)`` pairs: a node's recomputed expected demand."""
    return math.fsum(remaining(c, age, decay_seconds) for c, age in charges)
