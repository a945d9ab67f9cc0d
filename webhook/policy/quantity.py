"""Exact Kubernetes resource.Quantity parsing.

`parse_quantity` returns the exact value as a `fractions.Fraction` (no float
rounding anywhere). The scheduler works on integers, as kube-scheduler does:
`quantity_value` is `Quantity.Value()` (bytes, counts) and `quantity_milli` is
`Quantity.MilliValue()` (cpu in millicores); both round up, away from zero,
like resource.Quantity.

Grammar (apimachinery's): ``[+-]digits[.digits]`` or ``[+-].digits``, then one
suffix: binary ``Ki Mi Gi Ti Pi Ei``, decimal ``n u m k M G T P E`` or none,
or an exponent ``e<int>`` / ``E<int>``.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Final

__all__ = ["QuantityError", "parse_quantity", "quantity_milli", "quantity_value"]


class QuantityError(ValueError):
    """The text is not a valid Kubernetes quantity."""


_BINARY: Final = {
    "Ki": 1024,
    "Mi": 1024**2,
    "Gi": 1024**3,
    "Ti": 1024**4,
    "Pi": 1024**5,
    "Ei": 1024**6,
}
_DECIMAL: Final = {
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
_RE: Final = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE](?P<exp>[+-]?[0-9]+))?$"
)
_CACHE: dict[str, Fraction] = {}


def parse_quantity(value: str | int | float) -> Fraction:
    """Parse a quantity exactly. Raises QuantityError on malformed input."""
    if isinstance(value, bool):
        raise QuantityError(f"quantities must be strings or numbers, not {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"invalid quantity {value!r}")
        return parse_quantity(repr(value))
    if not isinstance(value, str):
        raise QuantityError(f"quantities must be strings or numbers, not {type(value).__name__}")
    cached = _CACHE.get(value)
    if cached is not None:
        return cached
    m = _RE.match(value.strip())
    if m is None:
        raise QuantityError(f"invalid quantity {value!r}")
    num = Fraction(m["num"])
    suffix = m["suffix"]
    exp = m["exp"]
    if exp is not None:
        e = int(exp)
        if abs(e) > 100:
            raise QuantityError(f"quantity exponent out of range in {value!r}")
        num *= Fraction(10) ** e
    elif suffix is not None:
        num *= _BINARY.get(suffix, 0) or _DECIMAL[suffix]
    if m["sign"] == "-":
        num = -num
    if len(_CACHE) < 4096:
        _CACHE[value] = num
    return num


def _round_away(q: Fraction) -> int:
    return math.ceil(q) if q >= 0 else math.floor(q)


def quantity_value(value: str | int | float) -> int:
    """`Quantity.Value()`: the integer value, rounded up (away from zero)."""
    return _round_away(parse_quantity(value))


def quantity_milli(value: str | int | float) -> int:
    """`Quantity.MilliValue()`: the value times 1000, rounded up (away from zero)."""
    return _round_away(parse_quantity(value) * 1000)
