"""Duration grammars as regular expressions: the one statement of which duration texts a field
takes, shared by the domain's readers, the API's published schema and the CRD.

A grammar is Go's duration syntax (what ``time.ParseDuration`` reads: "15m", "1h30m", "1.5h",
"300ms", ".5h", "5.h"; units ns, us, µs, μs, ms, s, m, h) plus fleetgate's ``d`` for days,
narrowed where fleetgate must:

- each number has at most a set count of digits for its unit and a text at most a set count of
  numbers, so no text sums past a bound (for a policy: past what ``time.ParseDuration`` reads,
  about 292 years, so a value fleetgate takes never overflows anything it is added to);
- a fraction is only as long as keeps the value a whole microsecond, which is the resolution
  fleetgate keeps (``ns`` only in whole thousands, ``us`` without a fraction): a finer value is
  refused rather than silently rounded.

The patterns use no look-around, so Python's ``re``, pydantic's Rust engine, JSON Schema
validators and the Kubernetes API server's Go ``regexp`` read them alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["FRACTION_DIGITS", "Grammar"]

#: Per unit: how many fraction digits keep any value a whole microsecond (the unit's length in
#: microseconds divided by 10**digits is whole), or None where no fraction may be given.
FRACTION_DIGITS: Mapping[str, int | None] = {
    "d": 8,  # 86_400_000_000 us / 10**8 = 864 us
    "h": 8,  # 3_600_000_000 us / 10**8 = 36 us
    "m": 7,  # 60_000_000 us / 10**7 = 6 us
    "s": 6,
    "ms": 3,
    "us": None,
    "µs": None,  # U+00B5 MICRO SIGN, as Go accepts
    "μs": None,  # U+03BC GREEK SMALL LETTER MU, as Go accepts
    "ns": None,  # whole thousands only (see _number)
}


@dataclass(frozen=True)
class Grammar:
    """A duration grammar: its units, the digits a number may have per unit, how many numbers.

    ``go_numbers``: numbers as Go writes them (".5h" and "5.h" too); otherwise digits are
    needed before a point and after it, as the reference controller's CRD pattern for
    ``ageThreshold`` has it.
    """

    digits: Mapping[str, int]
    """Unit -> the most digits its number may have before the point (leading zeros count)."""
    components: int = 8
    """The most numbers a text may have; a positive one may have this many on either side of
    its first non-zero number (so at most twice as many, less one)."""
    go_numbers: bool = True

    def any(self) -> str:
        """The pattern (unanchored) of a text of one or more numbers, zero included."""
        return f"(?:{'|'.join(self._components(nonzero=False))}){{1,{self.components}}}"

    def zero_text(self) -> str:
        """The pattern (unanchored) of a text whose numbers are all zero ("0s", "0h0m"), as
        many as a positive text may have."""
        zeros = "|".join(self._components(nonzero=False, zero=True))
        return f"(?:{zeros}){{1,{2 * self.components - 1}}}"

    def positive(self) -> str:
        """The pattern (unanchored) of a text with at least one number that is not zero."""
        some = f"(?:{'|'.join(self._components(nonzero=False))}){{0,{self.components - 1}}}"
        return f"{some}(?:{'|'.join(self._components(nonzero=True))}){some}"

    def _components(self, *, nonzero: bool, zero: bool = False) -> list[str]:
        """One alternative per unit: a number in that unit (non-zero, any, or all zeros)."""
        return [
            _number(unit, digits, FRACTION_DIGITS[unit], self.go_numbers, nonzero, zero) + unit
            for unit, digits in self.digits.items()
        ]


def _number(
    unit: str, digits: int, fraction: int | None, go: bool, nonzero: bool, zero: bool
) -> str:
    """A number for ``unit``: any value, only non-zero ones, or only zero ones."""
    if unit == "ns":  # a whole number of microseconds: the last three digits are 0
        if zero:
            return f"0{{1,{digits}}}"
        head = _nonzero_digits(digits - 3) if nonzero else f"[0-9]{{0,{digits - 3}}}"
        return f"{head}000" if nonzero else f"(?:{head}000|0{{1,2}})"
    if zero:
        whole, point = f"0{{1,{digits}}}", f"(?:\\.0{{{0 if go else 1},{fraction}}})?"
        forms = [whole + (point if fraction else "")]
        if go and fraction:
            forms.append(f"\\.0{{1,{fraction}}}")
        return f"(?:{'|'.join(forms)})"
    low = 0 if go else 1  # digits after a point: Go takes "5.h", the reference's CRD does not
    tail = f"(?:\\.[0-9]{{{low},{fraction}}})?" if fraction else ""
    if not nonzero:
        forms = [f"[0-9]{{1,{digits}}}{tail}"]
        if go and fraction:
            forms.append(f"\\.[0-9]{{1,{fraction}}}")
        return f"(?:{'|'.join(forms)})"
    forms = [f"{_nonzero_digits(digits)}{tail}"]
    if fraction:
        # A zero whole part (absent, in Go's ".5h") and a non-zero digit at fraction place i.
        whole = f"[0-9]{{{0 if go else 1},{digits}}}"
        forms += [f"{whole}\\.0{{{i}}}[1-9][0-9]{{0,{fraction - 1 - i}}}" for i in range(fraction)]
    return f"(?:{'|'.join(forms)})"


def _nonzero_digits(digits: int) -> str:
    """1 to ``digits`` digits, not all zero: the first non-zero one at each possible place."""
    places = (f"0{{{i}}}[1-9][0-9]{{0,{digits - 1 - i}}}" for i in range(digits))
    return "(?:" + "|".join(places) + ")"
