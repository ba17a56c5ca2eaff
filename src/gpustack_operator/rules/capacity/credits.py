"""Card, credit, slice and unit arithmetic (contract §5.1, §5.2, §4.4), exact and in integers.

Kueue only sees ``credits.gpustack.ai/<mfr>``: one whole card is D = 1_600_000 credits (2^9·5^5), so a
tenth of a card (a share), 1/512 of a card (the smallest slice) and 1 % of VRAM (16_000) are all whole
numbers and Kueue's int64 accounting never rounds a fractional card up to a whole one. Every conversion
between cards, credits and slices is here; the card's own units and the memory fold are the card model's
(rules.cards), so the ledger, the webhooks and the queues agree.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Final

from gpustack_operator.api.quantity import Quantity
from gpustack_operator.rules.cards import CARD_UNITS, MIB

CREDITS_PER_CARD: Final = CARD_UNITS
"""Kueue credits of one whole card."""
SLICED_RESOURCE_MAX_SIZE: Final = 512
"""Most slices per card; admin partition counts are powers of two in [2, 512]."""

_MICRO: Final = 10**6


def cards_to_credits(cards: Quantity) -> Quantity:
    """CardsToCredits: cards × D, rounded up to a whole credit (`1` -> `1600k`)."""
    return Quantity(Quantity(cards.exact * CREDITS_PER_CARD).value())


def credits_to_cards(credits: Quantity) -> Quantity:
    """CreditsToCards: whole credits (Value() rounds up first) / D, truncated to micro-cards.

    `200000` -> `125m`; `3125` -> `1953u` (1/512 card is 0.001953125, kept to the micro).
    """
    micro = abs(credits.value()) * _MICRO // CREDITS_PER_CARD
    return Quantity(Fraction(micro if credits.sign() >= 0 else -micro, _MICRO))


def quantity_to_slice_count(quantity: Quantity, size: int) -> Quantity:
    """QuantityToSliceCount: floor(q × size) slices; a size ≤ 0 means unsliced and returns q."""
    if size <= 0:
        return quantity
    return Quantity(math.floor(quantity.exact * size))


def units_per_slice(size: int) -> int:
    """Units of one slice when a card is cut into ``size`` (512 -> 3125); a size ≤ 0 is one whole card."""
    return CARD_UNITS // size if size > 0 else CARD_UNITS


def quantity_to_aligned_value(quantity: Quantity, size: int) -> Quantity:
    """QuantityToAlignedValue: q × (D / size) units; a size ≤ 0 returns q."""
    if size <= 0:
        return quantity
    return Quantity(quantity.exact * units_per_slice(size))


def quantity_to_original_value(quantity: Quantity, size: int) -> Quantity:
    """QuantityToOriginalValue: the inverse of quantity_to_aligned_value (`2400000`, 1 -> `1500m`)."""
    if size <= 0:
        return quantity
    return Quantity(quantity.exact / units_per_slice(size))


def is_valid_sliced_partitions(count: int) -> bool:
    """IsValidSlicedPartitions: a power of two in [2, 512]."""
    return 2 <= count <= SLICED_RESOURCE_MAX_SIZE and count & (count - 1) == 0


def memory_mib_to_units(mib: int, card_mib: int) -> int:
    """MemoryMibToUnits: floor(mib × D / card); 0 when the card size is unknown (≤ 0)."""
    return mib * CARD_UNITS // card_mib if card_mib > 0 else 0


def quantity_to_mib(quantity: Quantity) -> int:
    """Whole MiB in a byte quantity (`24Gi` -> 24576), rounded down."""
    return quantity.value() // MIB
