"""Go-style duration strings ("15m", "1h30m", "336h", "1.5h", "14d") <-> ``timedelta``.

Parsing is integer-exact: every component is converted to whole nanoseconds with integer
arithmetic (a fraction such as "1.5h" is read digit by digit, never through a float), and the sum
must land on a whole microsecond because that is ``timedelta``'s resolution. A duration that
would need sub-microsecond precision ("1ns") is rejected rather than silently rounded.

``format_duration`` prints the compact form operators read in findings: hours, minutes and
seconds with zero components left out ("142h43m", "1h17m", "90s" -> "1m30s", "0s"). Unlike Go's
``time.Duration.String`` it drops the trailing "0s" ("142h43m" rather than "142h43m0s") and never
prints days, so values stay comparable with ``expireAfter: 336h`` style inputs. Every formatted
value parses back to the same ``timedelta``.
"""

from __future__ import annotations

import re
from datetime import timedelta

__all__ = ["DurationError", "format_duration", "parse_duration"]

_NS_PER_UNIT: dict[str, int] = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 MICRO SIGN, as Go accepts
    "μs": 1_000,  # U+03BC GREEK SMALL LETTER MU, as Go accepts
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3_600 * 1_000_000_000,
    "d": 86_400 * 1_000_000_000,
}

# One component: digits, an optional fraction, a unit. Longest units first so "ms" wins over "m".
_COMPONENT = re.compile(r"([0-9]*)(?:\.([0-9]*))?(ns|us|µs|μs|ms|s|m|h|d)")
_NS_PER_US = 1_000


class DurationError(ValueError):
    """A duration string that is not a valid Go-style duration; the message quotes the text."""


def parse_duration(text: str) -> timedelta:
    """Parse a Go-style duration with optional days ("1h30m", "-1m", "14d") into a timedelta."""
    if not isinstance(text, str):
        raise DurationError(f'expected a duration string such as "15m", got {text!r}')
    body = text.strip()
    sign = 1
    if body[:1] in ("+", "-"):
        sign = -1 if body[0] == "-" else 1
        body = body[1:]
    if body == "0":  # Go's one unit-less form
        return timedelta(0)
    if not body:
        raise DurationError(f"invalid duration {text!r}: empty")
    total_ns = 0
    position = 0
    while position < len(body):
        match = _COMPONENT.match(body, position)
        if match is None or (not match.group(1) and not match.group(2)):
            raise DurationError(
                f"invalid duration {text!r}: expected a number followed by a unit "
                '(ns, us, ms, s, m, h, d), as in "15m" or "1h30m"'
            )
        whole, fraction, unit = match.group(1), match.group(2) or "", match.group(3)
        scale = _NS_PER_UNIT[unit]
        total_ns += int(whole or "0") * scale
        if fraction:
            # Exact: fraction digits / 10^len(fraction) of the unit, in whole nanoseconds.
            numerator = int(fraction) * scale
            denominator = 10 ** len(fraction)
            if numerator % denominator:
                raise DurationError(f"invalid duration {text!r}: finer than a nanosecond")
            total_ns += numerator // denominator
        position = match.end()
    if total_ns % _NS_PER_US:
        raise DurationError(
            f"invalid duration {text!r}: finer than a microsecond, which is the smallest step "
            "fleetgate keeps"
        )
    try:
        return timedelta(microseconds=sign * (total_ns // _NS_PER_US))
    except OverflowError:
        raise DurationError(f"invalid duration {text!r}: too large") from None


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
