"""Kubernetes resource quantities ("500m", "1Gi", "2", "1e3") <-> integer milli-units.

The domain counts resources as integers in milli-units (``fleetgate.domain.rotation.cluster``),
like Kubernetes' ``Quantity.MilliValue()``, which rounds a finer value *up*: a request of
"1n" CPU still needs a whole milli-CPU. Parsing is exact (``Fraction``), never through a float.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

__all__ = ["format_quantity", "parse_quantity", "parse_resources"]

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"^([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE]([+-]?[0-9]+))?$"
)


def parse_quantity(text: str | int | float) -> int:
    """Parse a quantity into milli-units, rounding up like ``MilliValue()``."""
    if isinstance(text, bool):
        raise ValueError(f"invalid quantity {text!r}")
    if isinstance(text, int):
        return text * 1000
    if isinstance(text, float):
        text = repr(text)
    match = _QUANTITY.match(text.strip())
    if match is None:
        raise ValueError(
            f"invalid quantity {text!r}: expected a number with an optional suffix "
            '(m, k, M, G, Ki, Mi, Gi, ... or an exponent), as in "500m" or "1Gi"'
        )
    sign, number, suffix, exponent = match.groups()
    value = Fraction(number)
    if exponent is not None:
        value *= Fraction(10) ** int(exponent)
    elif suffix in _BINARY:
        value *= _BINARY[suffix]
    else:
        value *= _DECIMAL[suffix or ""]
    milli = math.ceil(value * 1000)
    return -milli if sign == "-" else milli


def format_quantity(milli: int) -> str:
    """Format milli-units as the shortest exact quantity: ``1500`` -> "1500m", ``2000`` -> "2"."""
    if milli % 1000:
        return f"{milli}m"
    return str(milli // 1000)


def parse_resources(values: Mapping[str, Any] | None, where: str) -> dict[str, int]:
    """Parse a resource map (``{"cpu": "2", "memory": "4Gi"}``); errors name ``where``."""
    out: dict[str, int] = {}
    for name, raw in (values or {}).items():
        try:
            out[name] = parse_quantity(raw)
        except ValueError as exc:
            raise ValueError(f"{where}.{name}: {exc}") from None
    return out
