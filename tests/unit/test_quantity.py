"""Quantities parse, print and compute exactly as Kubernetes does, so our numbers match the cluster's."""

from __future__ import annotations

import re
from fractions import Fraction

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from gpustack_operator.api.quantity import (
    MAX_BINARY_SI,
    InvalidQuantityError,
    Quantity,
    QuantityFormat,
    format_binary_si_rounded,
    parse_quantity,
)

# Kubernetes' quantity grammar (resource.Quantity), as a regular expression for the canonical output.
QUANTITY_TEXT = re.compile(
    r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?"
)


@pytest.mark.parametrize(
    ("text", "canonical", "fmt"),
    [
        pytest.param("0", "0", QuantityFormat.DECIMAL_SI, id="zero"),
        pytest.param("0Gi", "0", QuantityFormat.BINARY_SI, id="binary-zero-prints-bare"),
        pytest.param("1", "1", QuantityFormat.DECIMAL_SI, id="bare-integer"),
        pytest.param("1600000", "1600k", QuantityFormat.DECIMAL_SI, id="credits-of-a-card-take-kilo"),
        pytest.param("6400000", "6400k", QuantityFormat.DECIMAL_SI, id="four-cards-of-credits"),
        pytest.param("1000m", "1", QuantityFormat.DECIMAL_SI, id="milli-folds-to-whole"),
        pytest.param("0.125", "125m", QuantityFormat.DECIMAL_SI, id="eighth-in-milli"),
        pytest.param("1.5", "1500m", QuantityFormat.DECIMAL_SI, id="fraction-in-milli"),
        pytest.param("0.001953125", "1953125n", QuantityFormat.DECIMAL_SI, id="slice-fraction-in-nano"),
        pytest.param("2000", "2k", QuantityFormat.DECIMAL_SI, id="thousands-in-kilo"),
        pytest.param("1000M", "1G", QuantityFormat.DECIMAL_SI, id="mega-folds-to-giga"),
        pytest.param("100.035k", "100035", QuantityFormat.DECIMAL_SI, id="fractional-kilo"),
        pytest.param("10.035M", "10035k", QuantityFormat.DECIMAL_SI, id="fractional-mega"),
        pytest.param("-2k", "-2k", QuantityFormat.DECIMAL_SI, id="negative"),
        pytest.param("+5", "5", QuantityFormat.DECIMAL_SI, id="explicit-plus"),
        pytest.param(".5", "500m", QuantityFormat.DECIMAL_SI, id="leading-dot"),
        pytest.param("1.", "1", QuantityFormat.DECIMAL_SI, id="trailing-dot"),
        pytest.param("1.G", "1G", QuantityFormat.DECIMAL_SI, id="trailing-dot-with-suffix"),
        pytest.param("1E", "1E", QuantityFormat.DECIMAL_SI, id="exa-suffix-not-exponent"),
        pytest.param("1000E", "1e21", QuantityFormat.DECIMAL_SI, id="past-exa-falls-back-to-exponent"),
        pytest.param("3.001n", "4n", QuantityFormat.DECIMAL_SI, id="sub-nano-rounds-up"),
        pytest.param("0.0000000001", "1n", QuantityFormat.DECIMAL_SI, id="tiny-rounds-up-to-one-nano"),
        pytest.param("0.00000012345", "124n", QuantityFormat.DECIMAL_SI, id="nano-rounding-is-upward"),
        pytest.param("15Gi", "15Gi", QuantityFormat.BINARY_SI, id="binary-gibi"),
        pytest.param("65535Mi", "65535Mi", QuantityFormat.BINARY_SI, id="binary-not-a-whole-gibi"),
        pytest.param("1024Mi", "1Gi", QuantityFormat.BINARY_SI, id="binary-folds-up"),
        pytest.param("1.5Gi", "1536Mi", QuantityFormat.BINARY_SI, id="fractional-binary-folds-down"),
        pytest.param("1536Ki", "1536Ki", QuantityFormat.BINARY_SI, id="binary-stops-when-not-divisible"),
        pytest.param("0.5Ki", "512", QuantityFormat.BINARY_SI, id="binary-under-1Ki-prints-decimal"),
        pytest.param("1.1Ki", "1126400m", QuantityFormat.BINARY_SI, id="binary-fraction-prints-decimal"),
        pytest.param(".000000000001Ki", "2n", QuantityFormat.DECIMAL_SI, id="fraction-of-a-byte-is-decimal"),
        pytest.param("9Ei", "9223372036854775807", QuantityFormat.BINARY_SI, id="binary-capped-at-int64"),
        pytest.param("1e3", "1e3", QuantityFormat.DECIMAL_EXPONENT, id="exponent-kept"),
        pytest.param("1E-3", "1e-3", QuantityFormat.DECIMAL_EXPONENT, id="negative-exponent"),
        pytest.param("1.3E+6", "1300e3", QuantityFormat.DECIMAL_EXPONENT, id="exponent-multiple-of-three"),
        pytest.param("0.5e-9", "1e-9", QuantityFormat.DECIMAL_EXPONENT, id="exponent-rounds-up-to-nano"),
        pytest.param("1.5e3", "1500", QuantityFormat.DECIMAL_EXPONENT, id="exponent-zero-prints-bare"),
    ],
)
def test_parse_prints_kubernetes_canonical_text(text: str, canonical: str, fmt: QuantityFormat) -> None:
    quantity = Quantity.parse(text)
    assert str(quantity) == canonical
    assert quantity.format is fmt
    assert Quantity.parse(canonical) == quantity


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param(".", id="lone-dot"),
        pytest.param("-", id="lone-sign"),
        pytest.param("abc", id="word"),
        pytest.param("1.1.M", id="two-dots"),
        pytest.param("1+1.0M", id="sign-inside"),
        pytest.param("0.1mi", id="lower-case-binary"),
        pytest.param("1K", id="upper-case-kilo"),
        pytest.param("1i", id="bare-i"),
        pytest.param("1e", id="exponent-without-digits"),
        pytest.param("-3.01e-", id="exponent-sign-without-digits"),
        pytest.param(" 1", id="leading-space"),
        pytest.param("1 ", id="trailing-space"),
        pytest.param("1e4294967297", id="exponent-out-of-range"),
    ],
)
def test_invalid_text_raises_an_error_naming_it(text: str) -> None:
    with pytest.raises(InvalidQuantityError) as caught:
        parse_quantity(text)
    assert repr(text) in str(caught.value)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("text", "value", "milli"),
    [
        pytest.param("1", 1, 1000, id="whole"),
        pytest.param("1.5", 2, 1500, id="half-rounds-up"),
        pytest.param("199999500m", 200000, 199999500, id="milli-credits-round-up"),
        pytest.param("1n", 1, 1, id="nano-rounds-up-to-one"),
        pytest.param("-1.5", -2, -1500, id="negative-rounds-away-from-zero"),
        pytest.param("1Ki", 1024, 1024000, id="binary"),
    ],
)
def test_value_and_milli_value_round_up(text: str, value: int, milli: int) -> None:
    quantity = Quantity.parse(text)
    assert quantity.value() == value
    assert quantity.milli_value() == milli


def test_arithmetic_is_exact_and_keeps_the_receivers_format() -> None:
    a, b = Quantity.parse("100m"), Quantity.parse("1Gi")
    assert str(a + Quantity.parse("200m")) == "300m"
    assert str(Quantity.parse("1Gi") - Quantity.parse("512Mi")) == "512Mi"
    assert str(a * 3) == "300m"
    assert str(Quantity.parse("3") * Fraction(1, 8)) == "375m"
    assert str(-a) == "-100m"
    assert str(Quantity.parse("0") + b) == "1Gi", "zero takes the other side's format, as in Kubernetes"
    assert str(b + Quantity.parse("0")) == "1Gi"
    assert Quantity.parse("0.1") + Quantity.parse("0.2") == Quantity.parse("0.3"), "no float drift"


@pytest.mark.parametrize(
    ("smaller", "larger"),
    [
        pytest.param("50m", "100m", id="milli"),
        pytest.param("100Gi", "10000T", id="binary-vs-decimal"),
        pytest.param("-1", "0", id="negative"),
        pytest.param("999999999n", "1", id="nano-below-one"),
    ],
)
def test_comparison_is_by_value_across_formats(smaller: str, larger: str) -> None:
    low, high = Quantity.parse(smaller), Quantity.parse(larger)
    assert low < high
    assert high > low
    assert low <= high
    assert high >= low
    assert low != high


def test_equal_values_in_different_formats_are_equal_and_hash_alike() -> None:
    assert Quantity.parse("1Ki") == Quantity.parse("1024") == 1024
    assert hash(Quantity.parse("1Ki")) == hash(Quantity.parse("1.024k"))
    assert str(Quantity.parse("1Ki").with_format(QuantityFormat.DECIMAL_SI)) == "1024"


@pytest.mark.parametrize(
    ("mebibytes", "text"),
    [
        pytest.param(15360, "15Gi", id="t4-15Gi"),
        pytest.param(81920, "80Gi", id="a100-80Gi"),
        pytest.param(196608, "192Gi", id="mi300x-192Gi"),
        pytest.param(44280, "43Gi", id="rounds-down-below-half"),
        pytest.param(1536, "2Gi", id="half-rounds-up"),
        pytest.param(512, "512Mi", id="under-a-gibi-stays-mebi"),
        pytest.param(1024 * 1024, "1Ti", id="tebi"),
    ],
)
def test_format_binary_si_rounded_names_vram_at_its_largest_unit(mebibytes: int, text: str) -> None:
    assert format_binary_si_rounded(mebibytes * 2**20) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param(0, "0", id="zero"),
        pytest.param(1023, "1023", id="bytes"),
        pytest.param(-2048, "-2Ki", id="neg"),
    ],
)
def test_format_binary_si_rounded_small_and_negative(value: int, text: str) -> None:
    assert format_binary_si_rounded(value) == text


quantities = st.builds(
    Quantity,
    st.fractions(max_denominator=10**12).map(lambda f: f * 10 ** (f.denominator % 25)),
    st.sampled_from(list(QuantityFormat)),
)


@given(quantities)
def test_canonical_text_round_trips_and_follows_the_grammar(quantity: Quantity) -> None:
    text = str(quantity)
    assert QUANTITY_TEXT.fullmatch(text), text
    # Kubernetes caps parsed binary quantities at int64, so only those below the cap round-trip.
    assume(quantity.format is not QuantityFormat.BINARY_SI or abs(quantity.exact) <= MAX_BINARY_SI)
    again = Quantity.parse(text)
    assert again == quantity
    # A bare binary integer such as 1953125000 reads back as decimal (1953125k), as in Kubernetes.
    assert str(again) == text or quantity.format is QuantityFormat.BINARY_SI
    assert str(Quantity.parse(str(again))) == str(again)


@given(quantities)
def test_value_is_the_smallest_integer_at_least_as_far_from_zero(quantity: Quantity) -> None:
    value, exact = quantity.value(), quantity.exact
    assert abs(value) >= abs(exact)
    assert abs(value) - abs(exact) < 1
    assert value * exact >= 0


@given(st.integers(min_value=-(10**30), max_value=10**30), st.integers(min_value=-9, max_value=18))
def test_parsed_decimal_equals_the_exact_number(mantissa: int, exponent: int) -> None:
    quantity = Quantity.parse(f"{mantissa}e{exponent}")
    assert quantity.exact == Fraction(mantissa) * Fraction(10) ** exponent
