"""The three allocation dimensions and node limits derived from capacity and overcommit ratios."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

CPUS: Final = "cpus"
MEMORY_MB: Final = "memory_mb"
DISK_GB: Final = "disk_gb"
#: The allocation dimensions, in the order every report and every guard lists them.
ALLOCATION: Final[tuple[str, str, str]] = (CPUS, MEMORY_MB, DISK_GB)

# The largest amounts any entry point accepts (the API, a snapshot file, a fleet file), chosen so
# no accepted value can overflow a database column or a guard's arithmetic.
#: Threads of one node, and a node's schedulable threads (a 32-bit column).
MAX_THREADS: Final = 1 << 20
#: vCPUs of one node, placement or claim.
MAX_CPUS: Final = 1 << 24
#: Memory (MB) or disk (GB) of one node, placement or claim: 2^40, about an exabyte of memory.
MAX_AMOUNT: Final = 1 << 40


def _check_count(field: str, value: object) -> int:
    # bool is an int subclass; a True where a count belongs is always a caller's mistake.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{field}: must be an integer, got {value!r}")
    if value < 0:
        raise ValueError(f"{field}: must not be negative, got {value}")
    return value


@dataclass(frozen=True)
class Resources:
    """An amount in each allocation dimension: vCPUs, MB of memory, GB of (virtual) disk."""

    cpus: int = 0
    memory_mb: int = 0
    disk_gb: int = 0

    def __post_init__(self) -> None:
        for name in ALLOCATION:
            _check_count(name, getattr(self, name))

    def get(self, dimension: str) -> int:
        """The amount in ``dimension`` (one of ``ALLOCATION``)."""
        if dimension not in ALLOCATION:
            raise ValueError(f"dimension: unknown allocation dimension {dimension!r}")
        value: int = getattr(self, dimension)
        return value

    def as_dict(self) -> dict[str, int]:
        """``{"cpus": .., "memory_mb": .., "disk_gb": ..}``."""
        return {name: self.get(name) for name in ALLOCATION}

    def plus(self, other: Resources) -> Resources:
        """The sum, dimension by dimension."""
        return Resources(*(self.get(d) + other.get(d) for d in ALLOCATION))

    def minus_floored(self, other: Resources) -> Resources:
        """The difference, each dimension floored at zero (no counter is driven negative)."""
        return Resources(*(max(0, self.get(d) - other.get(d)) for d in ALLOCATION))

    def is_zero(self) -> bool:
        """True when every dimension is zero."""
        return all(self.get(d) == 0 for d in ALLOCATION)


@dataclass(frozen=True)
class Overcommit:
    """How many allocatable units each physical unit backs (vCPUs per thread, and so on)."""

    cpu: float = 3.0
    memory: float = 1.0
    disk: float = 1.0

    def __post_init__(self) -> None:
        for name in ("cpu", "memory", "disk"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{name}_overcommit: must be a number, got {value!r}")
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name}_overcommit: must be a positive number, got {value!r}")


@dataclass(frozen=True)
class Capacity:
    """What a node physically has: hardware threads, memory in MB, disk in GB."""

    threads: int
    memory_mb: int
    disk_gb: int

    def __post_init__(self) -> None:
        for name in ("threads", "memory_mb", "disk_gb"):
            _check_count(name, getattr(self, name))


def node_limits(capacity: Capacity, overcommit: Overcommit) -> Resources:
    """Limits a node admits up to: each capacity times its overcommit ratio, rounded down."""
    return Resources(
        cpus=math.floor(capacity.threads * overcommit.cpu),
        memory_mb=math.floor(capacity.memory_mb * overcommit.memory),
        disk_gb=math.floor(capacity.disk_gb * overcommit.disk),
    )
