"""The one definition of a RotationPolicy's bounded fields: which texts and numbers each takes.

Every entry point reads a manifest through this: the domain's reader
(:mod:`~fleetgate.domain.rotation.manifest`, behind ``fleetgate check``, ``fleetgate simulate``,
the controller and the API's YAML text), the API's published schema (its patterns and bounds are
these) and the CRD (tests/deploy/test_crd_fields.py holds its patterns and bounds to these), so
the same manifest gets the same answer everywhere.

Durations are read as node-rotation-controller (NRC) reads them (its ``internal/policy/
policy.go`` and ``api/v1alpha1/rotationpolicy_types.go``):

- the ``surge`` durations are ``metav1.Duration`` there, parsed by Go's ``time.ParseDuration``:
  any Go duration text ("0", "+15m", "1.5h", "300ms", "-0s"), then ``cooldownAfter`` must not be
  negative (0 is allowed) and every other one must be greater than 0;
- ``ageThreshold`` is ``"auto"`` or what NRC's CRD pattern admits (digits before any point, no
  sign), greater than 0.

fleetgate adds ``d`` (days) to both, and narrows them where it must (see
:mod:`~fleetgate.domain.durationgrammar`): a number has at most as many digits as keep the whole
text under Go's limit (about 292 years), and a fraction stops at the microsecond, fleetgate's
resolution. Sub-second values are taken wherever they are positive ("300ms"), exact to the
microsecond; "1ns" is refused, not rounded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta

from fleetgate.domain.durationgrammar import Grammar
from fleetgate.domain.durations import DurationError, parse_duration

__all__ = [
    "AGE_THRESHOLD",
    "AUTO",
    "MAX_ROTATION_CHANCES",
    "MAX_UNAVAILABLE",
    "MIN_ROTATION_CHANCES",
    "NON_NEGATIVE_DURATION",
    "POSITIVE_DURATION",
    "SURGE_DURATIONS",
    "duration_problem",
    "read_duration",
]

#: ageThreshold's word for "derive it from the windows".
AUTO = "auto"
#: minRotationChances: at least one chance; at most 1000 (K weekly windows is already 19 years,
#: and K times the window period must stay a duration).
MIN_ROTATION_CHANCES, MAX_ROTATION_CHANCES = 1, 1000
#: surge.maxUnavailable: rotation is serial per NodePool in v1alpha1.
MAX_UNAVAILABLE = 1

#: Digits a number may have per unit: fifteen numbers (a positive text's most) of the largest
#: stay under Go's limit of 2**63 - 1 ns (106,751 days), e.g. 15 x 9,999,999m = 104,166 days.
_DIGITS = {"d": 3, "h": 5, "m": 7, "s": 8, "ms": 11, "us": 14, "µs": 14, "μs": 14, "ns": 17}
#: The surge durations: Go's syntax (NRC parses them with time.ParseDuration) plus days.
_GO = Grammar(_DIGITS)
#: ageThreshold: NRC's CRD pattern (no sign, digits before a point, no Greek mu) plus days.
_REFERENCE = Grammar({u: n for u, n in _DIGITS.items() if u != "μs"}, go_numbers=False)

#: A duration greater than 0 (readyTimeout, failurePause, retryBackoff, the estimates).
POSITIVE_DURATION = f"^\\+?(?:{_GO.positive()})$"
#: A duration of 0 or more (cooldownAfter): "0", "10m", and Go's "-0s", which is 0. Built from
#: the positive one, so a text one field takes as positive this one takes too.
_ZERO = f"0|{_GO.zero_text()}"
NON_NEGATIVE_DURATION = f"^(?:\\+?(?:{_ZERO}|{_GO.positive()})|-(?:{_ZERO}))$"
#: "auto", or a duration greater than 0 as NRC's CRD writes them.
AGE_THRESHOLD = f"^(?:{AUTO}|{_REFERENCE.positive()})$"

#: Every ``spec.surge`` duration and the pattern it must match.
SURGE_DURATIONS: Mapping[str, str] = {
    "readyTimeout": POSITIVE_DURATION,
    "cooldownAfter": NON_NEGATIVE_DURATION,
    "failurePause": POSITIVE_DURATION,
    "retryBackoff": POSITIVE_DURATION,
    "drainEstimate": POSITIVE_DURATION,
    "provisioningEstimate": POSITIVE_DURATION,
}
_DIGITS_TEXT = ", ".join(f"{n} for {u}" for u, n in _DIGITS.items() if u not in ("µs", "μs"))


def duration_problem(text: str, pattern: str) -> str | None:
    """Why ``text`` does not match a duration ``pattern`` of this module (None when it does)."""
    if re.fullmatch(pattern, text):
        return None
    problem = _value_problem(text, pattern) or _syntax_problem(text, pattern)
    if pattern == AGE_THRESHOLD and not problem.startswith('must be "auto"'):
        return f'must be "auto" or a duration: {problem}'
    return problem


def read_duration(text: str, pattern: str) -> tuple[timedelta | None, str | None]:
    """``(value, None)``, or ``(None, why)`` when ``text`` is no duration the field reads.

    A text whose only fault is its value (zero or negative where the field needs more) reads
    as that value: :meth:`RotationPolicy.validate` names it, so an explicit ``0m`` is refused by
    name and never replaced by a default, also where a policy is read without being validated.
    """
    if re.fullmatch(pattern, text) or _value_problem(text, pattern):
        return parse_duration(text), None
    return None, duration_problem(text, pattern)


def _value_problem(text: str, pattern: str) -> str | None:
    """What is wrong with the value of ``text``, written as the pattern's grammar admits apart
    from its sign (None when it does not parse, or its value is one the field takes)."""
    unsigned = text[1:] if text[:1] in ("+", "-") else text
    if not re.fullmatch(NON_NEGATIVE_DURATION, unsigned):
        return None
    value = parse_duration(text)
    if pattern == NON_NEGATIVE_DURATION:
        return "must not be negative (0 is allowed)" if value < timedelta(0) else None
    if value > timedelta(0):
        return None
    if pattern == AGE_THRESHOLD:
        return 'must be "auto" or greater than 0'
    return "must be greater than 0"


def _syntax_problem(text: str, pattern: str) -> str:
    """Why ``text``, which ``pattern`` refuses for its writing, is refused."""
    if pattern == AGE_THRESHOLD and text[:1] in ("+", "-", "."):
        return f'must be "auto" or a duration such as "240h" or "10d", got {text!r}'
    try:
        parse_duration(text)
    except DurationError as exc:
        return str(exc)
    return (
        f"invalid duration {text!r}: fleetgate reads Go durations plus d (days), with at most "
        f"{_DIGITS_TEXT} digits in a number, a fraction to the microsecond, and no spaces"
    )
