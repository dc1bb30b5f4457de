"""Go-style duration strings ("15m", "1h30m", "336h", "1.5h", "14d") <-> ``timedelta``.

Two readers share one scanner, which splits a text exactly as Go's ``time.ParseDuration`` does
(an optional sign; then numbers, each with an optional fraction and a unit; ``"0"`` alone is
zero; a unit is the whole run of characters up to the next digit or point, so ``"2h "`` names the
unit ``"h "``; digits are ASCII only):

- :func:`parse_go_duration` is ``time.ParseDuration`` itself, value for value: nanoseconds as an
  integer, fractions through a float64 as Go computes them, and Go's overflow bound (a value
  beyond 2**63 - 1 ns, about 292 years, is an error). It reads what Kubernetes and Karpenter read
  with Go, such as a ``karpenter.sh/do-not-disrupt`` duration.
- :func:`parse_duration` is fleetgate's own reading: Go's syntax plus ``d`` (days), exact (a
  fraction such as "1.5h" is read digit by digit, never through a float) and kept to the
  microsecond, ``timedelta``'s resolution: "1ns" is refused rather than silently rounded.
  Surrounding whitespace is ignored.

``format_duration`` prints the compact form operators read in findings: hours, minutes and
seconds with zero components left out ("142h43m", "1h17m", "90s" -> "1m30s", "0s"). Unlike Go's
``time.Duration.String`` it drops the trailing "0s" ("142h43m" rather than "142h43m0s") and never
prints days, so values stay comparable with ``expireAfter: 336h`` style inputs. Every formatted
value parses back to the same ``timedelta``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

__all__ = ["DurationError", "format_duration", "parse_duration", "parse_go_duration"]

#: Go's ``time`` unit table (format.go ``unitMap``), in nanoseconds.
_GO_UNITS: Mapping[str, int] = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 MICRO SIGN
    "μs": 1_000,  # U+03BC GREEK SMALL LETTER MU
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3_600 * 1_000_000_000,
}
#: fleetgate's units: Go's and days.
_NS_PER_UNIT: Mapping[str, int] = {**_GO_UNITS, "d": 86_400 * 1_000_000_000}
_NS_PER_US = 1_000
_BOUND = 1 << 63  # Go keeps the sum in a uint64 and refuses what passes this
_UINT64 = (1 << 64) - 1
_DIGITS = frozenset("0123456789")  # ASCII only, as Go's '0' <= c && c <= '9'


class DurationError(ValueError):
    """A duration string that is not a valid Go-style duration; the message quotes the text."""


def parse_go_duration(text: str) -> int:
    """Go's ``time.ParseDuration(text)`` in nanoseconds; :class:`DurationError` where Go errs."""
    negative, numbers = _scan(text, _GO_UNITS)
    total = 0
    for whole, fraction, unit in numbers:
        scale = _GO_UNITS[unit]
        value = _go_whole(whole, text)
        if value > _BOUND // scale:
            raise DurationError(f"invalid duration {text!r}: beyond Go's limit of 2^63-1 ns")
        value *= scale
        numerator, denominator = _go_fraction(fraction)
        if numerator > 0:
            # As Go: the fraction goes through float64, truncated to whole nanoseconds.
            value += int(float(numerator) * (float(scale) / denominator))
            if value > _BOUND:
                raise DurationError(f"invalid duration {text!r}: beyond Go's limit of 2^63-1 ns")
        total = (total + value) & _UINT64  # Go's uint64 sum (it can wrap to 0 at 2^64)
        if total > _BOUND:
            raise DurationError(f"invalid duration {text!r}: beyond Go's limit of 2^63-1 ns")
    if negative:
        return -total
    if total > _BOUND - 1:
        raise DurationError(f"invalid duration {text!r}: beyond Go's limit of 2^63-1 ns")
    return total


def parse_duration(text: str) -> timedelta:
    """Parse a Go-style duration with optional days ("1h30m", "-1m", "14d") into a timedelta."""
    if not isinstance(text, str):
        raise DurationError(f'expected a duration string such as "15m", got {text!r}')
    negative, numbers = _scan(text.strip(), _NS_PER_UNIT, shown=text)
    total_ns = 0
    for whole, fraction, unit in numbers:
        scale = _NS_PER_UNIT[unit]
        total_ns += int(whole or "0") * scale
        if fraction:
            # Exact: fraction digits / 10^len(fraction) of the unit, in whole nanoseconds.
            numerator = int(fraction) * scale
            denominator = 10 ** len(fraction)
            if numerator % denominator:
                raise DurationError(f"invalid duration {text!r}: finer than a nanosecond")
            total_ns += numerator // denominator
    if total_ns % _NS_PER_US:
        raise DurationError(
            f"invalid duration {text!r}: finer than a microsecond, which is the smallest step "
            "fleetgate keeps"
        )
    try:
        return timedelta(microseconds=(-1 if negative else 1) * (total_ns // _NS_PER_US))
    except OverflowError:
        raise DurationError(f"invalid duration {text!r}: too large") from None


def _scan(
    text: str, units: Mapping[str, int], shown: str | None = None
) -> tuple[bool, list[tuple[str, str, str]]]:
    """Split ``text`` as ``time.ParseDuration`` does: (negative, [(whole, fraction, unit)]).

    ``"0"`` (after an optional sign) is the one text without a unit: no numbers. Errors quote
    ``shown`` (the text as given), or ``text``.
    """
    quoted = repr(text if shown is None else shown)
    units_named = ", ".join(u for u in units if u not in ("µs", "μs"))
    invalid = f"invalid duration {quoted}: expected a number followed by a unit ({units_named})"
    body, negative = text, False
    if body[:1] in ("+", "-"):
        negative, body = body[0] == "-", body[1:]
    if body == "0":
        return negative, []
    if not body:
        raise DurationError(f"invalid duration {quoted}: empty")
    numbers: list[tuple[str, str, str]] = []
    at, end = 0, len(body)
    while at < end:
        if body[at] != "." and body[at] not in _DIGITS:
            raise DurationError(invalid)
        stop = _run(body, at, _DIGITS)
        whole, fraction = body[at:stop], ""
        if stop < end and body[stop] == ".":
            after = _run(body, stop + 1, _DIGITS)
            fraction, stop = body[stop + 1 : after], after
        if not whole and not fraction:
            raise DurationError(invalid)  # a point with no digit on either side (".s")
        unit_end = stop
        while unit_end < end and body[unit_end] != "." and body[unit_end] not in _DIGITS:
            unit_end += 1
        unit = body[stop:unit_end]
        if not unit:
            raise DurationError(f"invalid duration {quoted}: missing unit ({units_named})")
        if unit not in units:
            raise DurationError(
                f"invalid duration {quoted}: unknown unit {unit!r} (use {units_named})"
            )
        numbers.append((whole, fraction, unit))
        at = unit_end
    return negative, numbers


def _run(text: str, at: int, chars: frozenset[str]) -> int:
    """The end of the run of ``chars`` in ``text`` that starts at ``at``."""
    while at < len(text) and text[at] in chars:
        at += 1
    return at


def _go_whole(digits: str, text: str) -> int:
    """Go's ``leadingInt``: the number, refused once it passes 2^63."""
    value = 0
    for digit in digits:
        if value > _BOUND // 10:
            raise DurationError(f"invalid duration {text!r}: beyond Go's limit of 2^63-1 ns")
        value = value * 10 + ord(digit) - 48
        if value > _BOUND:
            raise DurationError(f"invalid duration {text!r}: beyond Go's limit of 2^63-1 ns")
    return value


def _go_fraction(digits: str) -> tuple[int, float]:
    """Go's ``leadingFraction``: (digits, 10^count) as far as precision lasts (never an error)."""
    value, scale = 0, 1.0
    for digit in digits:
        if value > (_BOUND - 1) // 10:
            break  # Go stops accumulating; the rest of the digits only get consumed
        following = value * 10 + ord(digit) - 48
        if following > _BOUND:
            break
        value, scale = following, scale * 10
    return value, scale


def format_duration(value: timedelta) -> str:
    """Format a timedelta compactly in hours, minutes and seconds ("142h43m", "1m30s", "0s")."""
    total_us = _whole_microseconds(value)
    if total_us == 0:
        return "0s"
    sign = "-" if total_us < 0 else ""
    total_us = abs(total_us)
    hours, rest = divmod(total_us, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    seconds, micros = divmod(rest, 1_000_000)
    parts: list[str] = []
    if hours:
        parts.append(f"{hours}h")
    if minutes:
        parts.append(f"{minutes}m")
    if micros:
        parts.append(f"{seconds}.{micros:06d}".rstrip("0") + "s")
    elif seconds:
        parts.append(f"{seconds}s")
    return sign + "".join(parts)


def _whole_microseconds(value: timedelta) -> int:
    """The timedelta as an exact integer count of microseconds."""
    return (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
