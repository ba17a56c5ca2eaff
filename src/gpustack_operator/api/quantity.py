"""Exact Kubernetes ``resource.Quantity`` parsing, arithmetic and canonical formatting.

Capacities, requests and credits flow between the operator, Kueue and the kubelet as Quantity strings. A
float would round ``0.1`` or ``1953125n`` differently from the API server and we would disagree with the
cluster about a card's free budget, so every value here is an integer count of nano-units (10^-9), which is
the finest scale Kubernetes keeps: like the API server, parsing rounds any finer value up (away from zero)
to the next nano-unit. Formatting reproduces Kubernetes' canonical form and keeps the format family of the
input (decimal SI, binary SI or decimal exponent) unless another one is asked for.

Two deliberate differences from apimachinery: text without a digit (``.``, ``-``) is an error rather
than zero, and decimal exponents are limited to ±1000.
"""

from __future__ import annotations

import enum
import functools
import math
import re
from fractions import Fraction
from typing import Final

__all__ = [
    "MAX_BINARY_SI",
    "InvalidQuantityError",
    "Quantity",
    "QuantityFormat",
    "format_binary_si_rounded",
    "parse_quantity",
]

NANO: Final = 10**9
"""Nano-units per unit: the finest scale a Quantity keeps."""

MAX_BINARY_SI: Final = 2**63 - 1
"""Kubernetes caps a parsed binary-SI quantity at the largest int64 (`9Ei` reads as 9223372036854775807)."""

MAX_EXPONENT: Final = 1000
"""Largest decimal exponent accepted (`1e1000`); bigger ones mean nothing and would cost unbounded memory."""


class QuantityFormat(enum.Enum):
    """The three text families of a Quantity, named as Kubernetes names them."""

    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


class InvalidQuantityError(ValueError):
    """Text that is not a Kubernetes quantity; the message names the text."""

    def __init__(self, text: str, reason: str = "quantities must match the regular expression") -> None:
        super().__init__(f"invalid quantity {text!r}: {reason}")
        self.text = text


_DECIMAL_SUFFIXES: Final = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIXES: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_EXPONENT_SUFFIX: Final = {exponent: suffix for suffix, exponent in _DECIMAL_SUFFIXES.items()}
_BINARY_SUFFIX: Final = {power: suffix for suffix, power in _BINARY_SUFFIXES.items()}

_PATTERN: Final = re.compile(
    r"(?P<sign>[+-]?)(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?"
    r"(?:(?P<bin>[KMGTPE]i)|[eE](?P<exp>[+-]?[0-9]+)|(?P<dec>[numkMGTPE]?))"
)


def _round_away(value: Fraction) -> int:
    """Round to an integer, away from zero (Kubernetes' inf.RoundUp)."""
    magnitude = -((-abs(value.numerator)) // value.denominator)
    return magnitude if value >= 0 else -magnitude


class Quantity:
    """An exact quantity: an integer number of nano-units plus the text family it is shown in."""

    __slots__ = ("_format", "_nanos")

    def __init__(self, value: int | Fraction = 0, fmt: QuantityFormat = QuantityFormat.DECIMAL_SI) -> None:
        """Build from an exact number; anything finer than 1n is rounded up (away from zero) to 1n."""
        self._nanos = _round_away(Fraction(value) * NANO)
        self._format = fmt

    @classmethod
    def parse(cls, text: str) -> Quantity:
        """Parse Kubernetes quantity text (`1.5`, `125m`, `15Gi`, `1e3`, `-2k`).

        Quantities are immutable and the same few texts come back in every Pod, review and decision, so
        parses are remembered (exact arithmetic on fractions made parsing most of a Pod review's work)."""
        return _parse(text)

    @classmethod
    def _parse_text(cls, text: str) -> Quantity:
        match = _PATTERN.fullmatch(text)
        if match is None or not (match["int"] or match["frac"]):
            raise InvalidQuantityError(text)
        digits = match["int"] + (match["frac"] or "")
        number = Fraction(int(digits), 10 ** len(match["frac"] or ""))
        if match["bin"] is not None:
            fmt, number = QuantityFormat.BINARY_SI, number * 2 ** _BINARY_SUFFIXES[match["bin"]]
        elif match["exp"] is not None:
            exponent = int(match["exp"])
            if abs(exponent) > MAX_EXPONENT:
                raise InvalidQuantityError(text, f"exponent beyond ±{MAX_EXPONENT}")
            fmt, number = QuantityFormat.DECIMAL_EXPONENT, number * Fraction(10) ** exponent
        else:
            fmt, number = QuantityFormat.DECIMAL_SI, number * Fraction(10) ** _DECIMAL_SUFFIXES[match["dec"]]
        if fmt is QuantityFormat.BINARY_SI:
            number = min(number, Fraction(MAX_BINARY_SI))  # Kubernetes caps binary quantities at int64
            if 0 < number < 1:
                fmt = QuantityFormat.DECIMAL_SI  # as Kubernetes does: a fraction of a byte is not binary
        return cls(-number if match["sign"] == "-" else number, fmt)

    @property
    def format(self) -> QuantityFormat:
        """The text family `str()` uses."""
        return self._format

    @property
    def exact(self) -> Fraction:
        """The exact value (a multiple of 10^-9)."""
        return Fraction(self._nanos, NANO)

    def with_format(self, fmt: QuantityFormat) -> Quantity:
        """The same value shown in another text family."""
        return Quantity(self.exact, fmt)

    def scaled_value(self, exponent: int) -> int:
        """The value in units of 10^exponent, rounded away from zero (Kubernetes ScaledValue)."""
        return _round_away(self.exact / Fraction(10) ** exponent)

    def value(self) -> int:
        """The value rounded up (away from zero) to an integer (Kubernetes Value)."""
        return self.scaled_value(0)

    def milli_value(self) -> int:
        """The value in thousandths, rounded up (away from zero) (Kubernetes MilliValue)."""
        return self.scaled_value(-3)

    def sign(self) -> int:
        """-1, 0 or 1."""
        return (self._nanos > 0) - (self._nanos < 0)

    def is_zero(self) -> bool:
        """True when the value is exactly zero."""
        return self._nanos == 0

    def __bool__(self) -> bool:
        return self._nanos != 0

    def _coerce(self, other: object) -> Fraction | None:
        if isinstance(other, Quantity):
            return other.exact
        if isinstance(other, int | Fraction):
            return Fraction(other)
        return None

    def _format_with(self, other: object) -> QuantityFormat:
        # Kubernetes Add/Sub keep the receiver's format unless the receiver is zero.
        if self._nanos == 0 and isinstance(other, Quantity):
            return other._format
        return self._format

    def __add__(self, other: Quantity | int | Fraction) -> Quantity:
        value = self._coerce(other)
        if value is None:
            return NotImplemented
        return Quantity(self.exact + value, self._format_with(other))

    __radd__ = __add__

    def __sub__(self, other: Quantity | int | Fraction) -> Quantity:
        value = self._coerce(other)
        if value is None:
            return NotImplemented
        return Quantity(self.exact - value, self._format_with(other))

    def __mul__(self, other: int | Fraction) -> Quantity:
        if isinstance(other, Quantity) or not isinstance(other, int | Fraction):
            return NotImplemented
        return Quantity(self.exact * other, self._format)

    __rmul__ = __mul__

    def __neg__(self) -> Quantity:
        return Quantity(-self.exact, self._format)

    def __abs__(self) -> Quantity:
        return Quantity(abs(self.exact), self._format)

    def __eq__(self, other: object) -> bool:
        value = self._coerce(other)
        return NotImplemented if value is None else self.exact == value

    def __hash__(self) -> int:
        return hash(self.exact)

    def __lt__(self, other: Quantity | int | Fraction) -> bool:
        value = self._coerce(other)
        return NotImplemented if value is None else self.exact < value

    def __le__(self, other: Quantity | int | Fraction) -> bool:
        value = self._coerce(other)
        return NotImplemented if value is None else self.exact <= value

    def __gt__(self, other: Quantity | int | Fraction) -> bool:
        value = self._coerce(other)
        return NotImplemented if value is None else self.exact > value

    def __ge__(self, other: Quantity | int | Fraction) -> bool:
        value = self._coerce(other)
        return NotImplemented if value is None else self.exact >= value

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"

    def __str__(self) -> str:
        """Kubernetes' canonical text in this quantity's format family."""
        sign = "-" if self._nanos < 0 else ""
        magnitude = abs(self._nanos)
        fmt = self._format
        if fmt is QuantityFormat.BINARY_SI:
            # Binary only for whole numbers from 1Ki up whose power of 1024 has a suffix; else decimal.
            fmt = QuantityFormat.DECIMAL_SI
            if magnitude % NANO == 0 and magnitude >= 1024 * NANO:
                number, power = magnitude // NANO, 0
                while number % 1024 == 0:
                    number, power = number // 1024, power + 10
                if power in _BINARY_SUFFIX or power == 0:
                    return f"{sign}{number}{_BINARY_SUFFIX.get(power, '')}"
                fmt = QuantityFormat.DECIMAL_EXPONENT
        mantissa, exponent = _decimal_mantissa(magnitude)
        if fmt is QuantityFormat.DECIMAL_EXPONENT or exponent not in _EXPONENT_SUFFIX:
            return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
        return f"{sign}{mantissa}{_EXPONENT_SUFFIX[exponent]}"


def _decimal_mantissa(nanos: int) -> tuple[int, int]:
    """Split a non-negative nano count into the smallest integer mantissa × 10^exponent, exponent % 3 == 0."""
    if nanos == 0:
        return 0, 0
    mantissa, exponent = nanos, -9
    while mantissa % 1000 == 0:
        mantissa, exponent = mantissa // 1000, exponent + 3
    return mantissa, exponent


def parse_quantity(text: str) -> Quantity:
    """Parse Kubernetes quantity text; raises InvalidQuantityError naming the text."""
    return Quantity.parse(text)


_ROUNDED_UNITS: Final = tuple(
    (2**power, suffix) for power, suffix in sorted(_BINARY_SUFFIX.items(), reverse=True)
)


def format_binary_si_rounded(value: Quantity | int) -> str:
    """Show a byte count at its largest binary unit, rounded half-up: 15 GiB -> `15Gi`, 1.4 GiB -> `1Gi`.

    Unlike the canonical BinarySI text this is lossy on purpose: it names a card's VRAM in a label value.
    Values under 1Ki become a plain (rounded) integer; 0 is `0`.
    """
    exact = value.exact if isinstance(value, Quantity) else Fraction(value)
    for unit, suffix in _ROUNDED_UNITS:
        if abs(exact) >= unit:
            return f"{_round_half_up(exact / unit)}{suffix}"
    return str(_round_half_up(exact))


def _round_half_up(value: Fraction) -> int:
    """Round half away from zero."""
    magnitude = (2 * abs(value.numerator) + value.denominator) // (2 * value.denominator)
    return magnitude if value >= 0 else -magnitude


MAX_QUANTITY_TEXT: Final = 64
"""The longest quantity text `to_quantity` reads from untrusted JSON."""


def to_quantity(value: object) -> Quantity | None:
    """A JSON quantity (string or number) as a Quantity; None when it is not one.

    Text over 64 characters and integers beyond int64 are refused: no real request is that long, and
    bounding them keeps the arithmetic and the printed results small whatever a client sends.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Quantity(value) if abs(value) <= MAX_BINARY_SI else None
    text = repr(value) if isinstance(value, float) else value
    if not isinstance(text, str) or len(text) > MAX_QUANTITY_TEXT:
        return None
    try:
        return parse_quantity(text)
    except ValueError:
        return None


def percent_of(quantity: Quantity, percent: int) -> Quantity:
    """``quantity`` × ``percent``/100, rounded up to the smallest suffix of its format family (see below)."""
    step = Fraction(1024) if quantity.format is QuantityFormat.BINARY_SI else Fraction(1, NANO)
    return Quantity(math.ceil(quantity.exact * percent / 100 / step) * step, quantity.format)


def string_percent_multiply(quantity: str, percent: int) -> str:
    """StringPercentMultiply: ``percent`` % of ``quantity``, as Kubernetes quantity text.

    The rule: the exact product ``quantity × percent / 100`` is rounded up (towards +∞) to a whole
    number of the smallest suffix of the input's format family, then printed canonically in that family:
    1Ki for binary SI (30 % of `16Gi` is 5033164.8Ki, shown `5033165Ki`; 25 % is `4Gi`) and 1n for
    decimal SI and decimal exponent (the finest step a Quantity keeps: 33 % of `1` is `330m`, 30 % of
    `4` is `1200m`). Exact throughout (fractions, no floats). Raises InvalidQuantityError on bad text.
    """
    return str(percent_of(parse_quantity(quantity), percent))


@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> Quantity:
    return Quantity._parse_text(text)
