"""Cards, credits, slices and memory units convert exactly, as Kueue and the ledger need (§5.1, §5.2)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpustack_operator.api.quantity import Quantity
from gpustack_operator.rules.capacity.credits import (
    cards_to_credits,
    credits_to_cards,
    is_valid_sliced_partitions,
    memory_mib_to_units,
    quantity_to_aligned_value,
    quantity_to_mib,
    quantity_to_original_value,
    quantity_to_slice_count,
    units_per_slice,
)
from gpustack_operator.rules.cards import CARD_UNITS, SHARED_UNITS, SliceUnitsError, slice_units

Q = Quantity.parse


def _maybe(text: str | None) -> Quantity | None:
    return None if text is None else Q(text)


def test_constants() -> None:
    assert CARD_UNITS == 1_600_000 == 2**9 * 5**5
    assert SHARED_UNITS == 160_000
    assert units_per_slice(512) == 3125


@pytest.mark.parametrize(
    ("cards", "credits"),
    [
        pytest.param("1", "1600k", id="one-card"),
        pytest.param("4", "6400k", id="four-cards"),
        pytest.param("0", "0", id="none"),
        pytest.param("125m", "200k", id="eighth-card"),
    ],
)
def test_cards_to_credits(cards: str, credits: str) -> None:
    assert str(cards_to_credits(Q(cards))) == credits


@pytest.mark.parametrize(
    ("credits", "cards"),
    [
        pytest.param("1600000", "1", id="one-card"),
        pytest.param("6400000", "4", id="four-cards"),
        pytest.param("200000", "125m", id="eighth"),
        pytest.param("400000", "250m", id="quarter"),
        pytest.param("5800000", "3625m", id="three-and-five-eighths"),
        pytest.param("3125", "1953u", id="smallest-slice-truncated-to-micro"),
        pytest.param("0", "0", id="none"),
        pytest.param("199999500m", "125m", id="value-rounds-up-before-dividing"),
    ],
)
def test_credits_to_cards(credits: str, cards: str) -> None:
    assert str(credits_to_cards(Q(credits))) == cards


@given(st.integers(min_value=0, max_value=10**12))
def test_credits_round_trip_micro_cards(micro_cards: int) -> None:
    cards = Quantity(Fraction(micro_cards, 10**6))
    assert credits_to_cards(cards_to_credits(cards)) == cards


@pytest.mark.parametrize(
    ("quantity", "size", "want"),
    [
        pytest.param("1", 0, "1", id="unsliced-unchanged"),
        pytest.param("1.5", 1, "1", id="floored"),
        pytest.param("1", 2, "2", id="halves"),
        pytest.param("0.5", 4, "2", id="half-in-quarters"),
        pytest.param("0.25", 8, "2", id="quarter-in-eighths"),
        pytest.param("0.125", 16, "2", id="eighth-in-sixteenths"),
        pytest.param("1", 512, "512", id="finest"),
    ],
)
def test_quantity_to_slice_count(quantity: str, size: int, want: str) -> None:
    assert str(quantity_to_slice_count(Q(quantity), size)) == want


@pytest.mark.parametrize(
    ("quantity", "size", "want"),
    [
        pytest.param("1", 0, "1", id="unsliced-unchanged"),
        pytest.param("1.5", 1, "2400k", id="one-and-a-half-cards"),
        pytest.param("1", 2, "800k", id="half-card"),
        pytest.param("1", 4, "400k", id="quarter"),
        pytest.param("1", 8, "200k", id="eighth"),
        pytest.param("1", 16, "100k", id="sixteenth"),
        pytest.param("1", 512, "3125", id="finest"),
    ],
)
def test_quantity_to_aligned_value(quantity: str, size: int, want: str) -> None:
    assert str(quantity_to_aligned_value(Q(quantity), size)) == want


@pytest.mark.parametrize(
    ("quantity", "size", "want"),
    [
        pytest.param("2400000", 1, "1500m", id="one-and-a-half-cards"),
        pytest.param("800000", 2, "1", id="half"),
        pytest.param("400000", 4, "1", id="quarter"),
        pytest.param("200000", 8, "1", id="eighth"),
        pytest.param("100000", 16, "1", id="sixteenth"),
        pytest.param("3125", 512, "1", id="finest"),
    ],
)
def test_quantity_to_original_value(quantity: str, size: int, want: str) -> None:
    assert str(quantity_to_original_value(Q(quantity), size)) == want


@given(st.integers(min_value=0, max_value=10**9), st.sampled_from([2**k for k in range(10)]))
def test_aligned_value_inverts(slices: int, size: int) -> None:
    quantity = Quantity(slices)
    assert quantity_to_original_value(quantity_to_aligned_value(quantity, size), size) == quantity


@pytest.mark.parametrize(
    ("count", "valid"),
    [
        pytest.param(0, False, id="zero"),
        pytest.param(1, False, id="one-is-not-a-partition"),
        pytest.param(2, True, id="two"),
        pytest.param(3, False, id="not-power-of-two"),
        pytest.param(8, True, id="eight"),
        pytest.param(16, True, id="sixteen"),
        pytest.param(512, True, id="max"),
        pytest.param(1024, False, id="over-max"),
        pytest.param(-8, False, id="negative"),
    ],
)
def test_is_valid_sliced_partitions(count: int, valid: bool) -> None:
    assert is_valid_sliced_partitions(count) is valid


@pytest.mark.parametrize(
    ("mib", "card", "units"),
    [
        pytest.param(4096, 40960, 160_000, id="tenth-of-a-40g-card"),
        pytest.param(40960, 40960, 1_600_000, id="whole-card"),
        pytest.param(1, 3, 533_333, id="floored"),
        pytest.param(4096, 0, 0, id="unknown-card"),
        pytest.param(4096, -1, 0, id="negative-card"),
    ],
)
def test_memory_mib_to_units(mib: int, card: int, units: int) -> None:
    assert memory_mib_to_units(mib, card) == units


@pytest.mark.parametrize(
    ("memory", "mib"),
    [pytest.param("65535Mi", 65535, id="mebi"), pytest.param("24Gi", 24576, id="gibi")],
)
def test_quantity_to_mib(memory: str, mib: int) -> None:
    assert quantity_to_mib(Q(memory)) == mib


@pytest.mark.parametrize(
    ("percentage", "mib", "card", "units"),
    [
        pytest.param("20", None, None, 320_000, id="memory-percentage-20"),
        pytest.param("60", None, None, 960_000, id="memory-percentage-60"),
        pytest.param("100", None, None, 1_600_000, id="memory-percentage-100"),
        pytest.param(None, "4096", 40960, 160_000, id="memory-mib-on-40960Mi-card"),
        pytest.param("20", "4096", None, 320_000, id="percentage-wins-over-mib"),
        pytest.param("0", None, None, None, id="zero-percentage-is-left-to-validation"),
        pytest.param(None, None, None, None, id="no-memory-key"),
    ],
)
def test_sliced_units(percentage: str | None, mib: str | None, card: int | None, units: int | None) -> None:
    assert slice_units(_maybe(percentage), _maybe(mib), card) == units


@pytest.mark.parametrize(
    ("percentage", "mib", "card", "message"),
    [
        pytest.param("200", None, None, "over 100", id="memory-percentage-200"),
        pytest.param(None, "81920", 40960, "exceeds", id="memory-mib-larger-than-card"),
        pytest.param(None, "4096", None, "VRAM", id="memory-mib-without-card-vram"),
        pytest.param(None, "4096", 0, "VRAM", id="memory-mib-with-zero-card-vram"),
        pytest.param("0.00001", None, None, "less than one unit", id="rounds-to-no-unit"),
    ],
)
def test_sliced_units_errors(percentage: str | None, mib: str | None, card: int | None, message: str) -> None:
    with pytest.raises(SliceUnitsError, match=message):
        slice_units(_maybe(percentage), _maybe(mib), card)
