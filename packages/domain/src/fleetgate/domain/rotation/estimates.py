"""Estimates checked against reality (ADR-0002 "Option 2", in its safe form).

Every successful rotation leaves two observations: how long the surge node took to be Ready
(``surge-wait``, the provisioning time) and how long the drain took. The last few of each are
kept on the NodePool (so a restarted controller remembers them) and their median is the pool's
moving estimate. When the *estimate* the policy resolves (explicit, or Derive's default) is off
by more than a factor of two from that median, the controller says so, naming the observed value.

Only the two estimates are ever compared. terminationGracePeriod and readyTimeout are deadlines:
a drain is cut at tGP and a surge abandoned at readyTimeout, so observations are censored by the
very values they would "calibrate" — fitting a deadline to them is a ratchet. The message says
so instead of suggesting any change to them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import cached_property, lru_cache

from fleetgate.domain.durations import format_duration, parse_duration
from fleetgate.domain.rotation.annotations import PREFIX

OBSERVED_PROVISIONING = PREFIX + "observed-provisioning"
"""Comma-separated durations of the last surge waits (most recent last)."""
OBSERVED_DRAIN = PREFIX + "observed-drain"
"""Comma-separated durations of the last drains (most recent last)."""

KEEP = 8
"""How many observations of each kind the pool remembers."""
WINDOW = 5
"""How many of the most recent observations the moving estimate uses."""
MIN_SAMPLES = 3
"""No verdict before this many observations: one slow rotation is not a trend."""
FACTOR = 2
"""Disagreement threshold: observed above FACTOR x estimate, or below estimate / FACTOR."""

FIELDS = {"provisioning": "surge.provisioningEstimate", "drain": "surge.drainEstimate"}
KEYS = {"provisioning": OBSERVED_PROVISIONING, "drain": OBSERVED_DRAIN}


def read_samples(annotations: Mapping[str, str], key: str) -> list[timedelta]:
    """The observations stored under ``key``; unparseable entries are skipped."""
    return list(_parse_samples(annotations.get(key) or ""))


@lru_cache(maxsize=1024)
def _parse_samples(text: str) -> tuple[timedelta, ...]:
    out = []
    for part in text.split(","):
        try:
            out.append(parse_duration(part.strip()))
        except ValueError:
            continue
    return tuple(out)


def append_sample(annotations: Mapping[str, str], key: str, value: timedelta) -> str:
    """The new value of ``key`` with ``value`` appended, keeping the last ``KEEP``."""
    kept = [*read_samples(annotations, key), max(value, timedelta(0))][-KEEP:]
    return ",".join(map(_sample_text, kept))


@lru_cache(maxsize=1024)
def _sample_text(value: timedelta) -> str:
    # Each rotation writes all KEEP samples again, seven of them as the last rotation did.
    return format_duration(value)


def moving_estimate(samples: Sequence[timedelta]) -> timedelta | None:
    """The median of the last ``WINDOW`` observations (lower median), or None without any."""
    recent = sorted(samples[-WINDOW:])
    if not recent:
        return None
    return recent[(len(recent) - 1) // 2]


@dataclass(frozen=True)
class EstimateCheck:
    """The verdict on one estimate: what the policy resolves to against what was observed."""

    kind: str
    configured: timedelta
    explicit: bool
    observed: timedelta
    samples: int
    disagrees: bool

    @property
    def field(self) -> str:
        """The policy field that holds this estimate."""
        return FIELDS[self.kind]

    def message(self) -> str:
        """Plain English for the Warning event, naming the observed value."""
        return self._message

    @cached_property
    def _message(self) -> str:
        # Built once per verdict: the same verdict is announced (and deduplicated) every pass.
        source = "configured" if self.explicit else "defaulted"
        return (
            f"observed {self.kind} time (median of the last {min(self.samples, WINDOW)} "
            f"rotations) is {format_duration(self.observed)}, but {self.field} is "
            f"{format_duration(self.configured)} ({source}); consider setting {self.field} to "
            f"about {format_duration(self.observed)}. This only changes the throughput forecast; "
            "terminationGracePeriod and readyTimeout are deadlines and are not fitted to "
            "observations."
        )


def check_estimate(
    kind: str, configured: timedelta, explicit: bool, samples: Sequence[timedelta]
) -> EstimateCheck | None:
    """Compare one resolved estimate with the observations; None while there are too few."""
    return _checked(kind, configured, explicit, tuple(samples))


@lru_cache(maxsize=256)
def _checked(
    kind: str, configured: timedelta, explicit: bool, samples: tuple[timedelta, ...]
) -> EstimateCheck | None:
    # Every pass checks the pool's estimates, which change once a rotation: one verdict value
    # per input, its message built once.
    if kind not in FIELDS:
        raise ValueError(f"kind: {kind!r} is not one of {sorted(FIELDS)}")
    observed = moving_estimate(samples)
    if observed is None or len(samples) < MIN_SAMPLES:
        return None
    disagrees = observed > FACTOR * configured or observed * FACTOR < configured
    return EstimateCheck(kind, configured, explicit, observed, len(samples), disagrees)
