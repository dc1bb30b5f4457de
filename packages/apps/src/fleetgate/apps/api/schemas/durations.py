"""The duration strings the API accepts, as regular expressions its schema publishes.

A RotationPolicy's durations use the CRD's syntax (Go durations with days: "15m", "1h30m",
"1.5h"), narrowed to what the server then accepts, so that every string the pattern admits is
one the server takes: a fraction is only as long as keeps the value a whole microsecond
(fleetgate's resolution; "ns" only in whole thousands), numbers are bounded so no sum overflows,
and :data:`POSITIVE_DURATION` needs a component that is not zero. The patterns use no look-around,
so pydantic's regex engine and every JSON Schema validator read them alike.

A simulation adds its durations to instants, so its own (the fleet file's, the environment's, the
span) are bounded tighter: :data:`SIMULATION_DURATION` takes four digits a component, not six.
"""

from __future__ import annotations

__all__ = [
    "DURATION",
    "POSITIVE_DURATION",
    "POSITIVE_SIMULATION_DURATION",
    "SIMULATION_DURATION",
]

#: Per unit: how many fraction digits keep any value a whole microsecond (a unit's length in
#: microseconds divided by 10**digits is a whole number), or None where none may be given.
_FRACTION_DIGITS: dict[str, int | None] = {
    "d": 8,  # 86_400_000_000 us / 10**8 = 864 us
    "h": 8,  # 3_600_000_000 us / 10**8 = 36 us
    "m": 7,  # 60_000_000 us / 10**7 = 6 us
    "s": 6,
    "ms": 3,
    "us": None,
    "µs": None,  # U+00B5 MICRO SIGN, as Go (and the CRD) accept
    "μs": None,  # U+03BC GREEK SMALL LETTER MU
}
#: At most this many digits before a point (and before "000" in "ns"): 10**6 days is far from
#: timedelta's limit even summed over every component.
_WHOLE_DIGITS = 6
#: A simulation's own durations have at most this many: eight components of under 10**4 days
#: stay below 220 years, so no instant a run computes from them leaves the calendar.
_SIMULATION_DIGITS = 4
#: At most this many components ("1d2h3m4s5ms6us7000ns" has seven).
_COMPONENTS = 8


def _units(units: str) -> str:
    """A regex alternation of unit names (longest first, so "ms" is not read as "m")."""
    return "(?:" + "|".join(units.split()) + ")"


def _component(unit: str, fraction: int | None, digits: int) -> str:
    """One component in ``unit`` (any value, zero included)."""
    whole = f"[0-9]{{1,{digits}}}"
    tail = f"(?:\\.[0-9]{{1,{fraction}}})?" if fraction else ""
    return f"{whole}{tail}{unit}"


def _nonzero_digits(digits: int) -> str:
    """1 to ``digits`` digits, not all zero: the first non-zero one at each possible place."""
    places = (f"0{{{i}}}[1-9][0-9]{{0,{digits - 1 - i}}}" for i in range(digits))
    return "(?:" + "|".join(places) + ")"


def _nonzero_component(unit: str, fraction: int | None, digits: int) -> str:
    """One component in ``unit`` whose value is not zero."""
    whole = _nonzero_digits(digits)
    forms = [f"{whole}(?:\\.[0-9]{{1,{fraction}}})?" if fraction else whole]
    if fraction:
        # A zero whole part with a non-zero digit at fraction position i, digits in all <= max.
        forms += [
            f"[0-9]{{1,{digits}}}\\.0{{{i}}}[1-9][0-9]{{0,{fraction - 1 - i}}}"
            for i in range(fraction)
        ]
    return f"(?:{'|'.join(forms)}){unit}"


def _patterns(digits: int) -> tuple[str, str]:
    """The patterns of a duration, and of a positive one, with ``digits`` whole digits at most."""
    units = _FRACTION_DIGITS.items()
    any_ = "|".join([f"[0-9]{{1,{digits}}}000ns", *(_component(u, f, digits) for u, f in units)])
    nonzero = "|".join(
        [
            f"{_nonzero_digits(digits)}000ns",
            *(_nonzero_component(u, f, digits) for u, f in units),
        ]
    )
    some, more = f"(?:{any_}){{0,{_COMPONENTS - 1}}}", f"(?:{nonzero})"
    return f"^(?:{any_}){{1,{_COMPONENTS}}}$", f"^{some}{more}{some}$"


#: A duration of zero or more ("0s", "10m", "1h30m"), and one greater than zero.
DURATION, POSITIVE_DURATION = _patterns(_WHOLE_DIGITS)
#: The same for a simulation's fleet, environment and span (at most four digits a component).
SIMULATION_DURATION, POSITIVE_SIMULATION_DURATION = _patterns(_SIMULATION_DIGITS)
