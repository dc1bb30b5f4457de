"""The duration strings the API accepts outside a policy, as regular expressions its schema
publishes (a policy's own durations are the domain's: :mod:`fleetgate.domain.rotation.fields`).

Go durations with days ("15m", "1h30m", "1.5h", "14d"), written with digits before any point,
narrowed to what the server then accepts (:class:`~fleetgate.domain.durationgrammar.Grammar`):
a fraction only as long as keeps the value a whole microsecond, numbers bounded so no sum
overflows, and :data:`POSITIVE_DURATION` needs a number that is not zero.

A simulation adds its durations to instants, so its own (the fleet file's, the environment's, the
span) are bounded tighter: :data:`SIMULATION_DURATION` takes four digits a number, not six.
"""

from __future__ import annotations

from fleetgate.domain.durationgrammar import FRACTION_DIGITS, Grammar

__all__ = [
    "DURATION",
    "POSITIVE_DURATION",
    "POSITIVE_SIMULATION_DURATION",
    "SIMULATION_DURATION",
]


def _patterns(digits: int) -> tuple[str, str]:
    """The patterns of a duration, and of a positive one, with ``digits`` whole digits at most
    (10**6 days is far from timedelta's limit even summed over every number)."""
    # "ns" counts the three zeros that keep it a whole microsecond on top.
    grammar = Grammar(
        {unit: digits + 3 if unit == "ns" else digits for unit in FRACTION_DIGITS},
        go_numbers=False,
    )
    return f"^{grammar.any()}$", f"^{grammar.positive()}$"


#: A duration of zero or more ("0s", "10m", "1h30m"), and one greater than zero.
DURATION, POSITIVE_DURATION = _patterns(6)
#: The same for a simulation's fleet, environment and span (at most four digits a number): eight
#: numbers of under 10**4 days stay below 220 years, so no instant a run computes leaves the
#: calendar.
SIMULATION_DURATION, POSITIVE_SIMULATION_DURATION = _patterns(4)
