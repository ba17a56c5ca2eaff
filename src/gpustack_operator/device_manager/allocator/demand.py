"""How many units a container takes from each card it is given, and what a slice asks for.

The ledger counts in units (one card = 1,600,000): exclusive takes the whole card, a share takes 160,000
per token, and a slice takes the container's `<base>.sliced.units` on each card (the webhook folds the
memory request into it; without it the memory keys are folded here the same way). A slice also names its
compute share (`.sliced.cores-percentage`, default 100) and its VRAM cap (`.sliced.memory-percentage`, or
`.sliced.memory-mib` capped at the card), which become HAMi-core limits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpustack_operator.api.quantity import Quantity
from gpustack_operator.api.types.devices import DeviceAllocationMode
from gpustack_operator.device_manager.allocator.pods import limit
from gpustack_operator.device_manager.plugin.handler import AllocationRefusedError
from gpustack_operator.device_manager.plugin.ids import DeviceID
from gpustack_operator.device_manager.plugin.inventory import CardInfo
from gpustack_operator.rules.capacity.credits import (
    RESOURCE_MAX_UNITS,
    SHARED_UNITS,
    SlicedUnitsError,
    sliced_units,
)
from gpustack_operator.rules.naming.resources import ResourceKind, resource_name_for

CardKey = tuple[str, str]
DEFAULT_CORES_PERCENTAGE = 100


@dataclass(frozen=True)
class SlicedRequest:
    """A sliced container's `.sliced.*` limits."""

    units: int | None = None
    cores_percentage: int = DEFAULT_CORES_PERCENTAGE
    memory_percentage: Quantity | None = None
    memory_mib: Quantity | None = None

    def card_units(self, card_mib: int) -> int:
        """Units taken on one card: the folded `.sliced.units`, else the memory request folded here.

        A memory-mib larger than this card counts as the whole card, as its memory limit is capped.
        """
        if self.units is not None and self.units > 0:
            return self.units
        mib = self.memory_mib
        if mib is not None and 0 < card_mib < mib:
            mib = Quantity(card_mib)
        try:
            units = sliced_units(self.memory_percentage, mib, card_mib)
        except SlicedUnitsError as err:
            raise AllocationRefusedError(f"sliced request: {err}") from err
        if units is None:
            raise AllocationRefusedError(
                "a sliced request needs .sliced.memory-percentage or .sliced.memory-mib"
            )
        return units

    def memory_limit_mib(self, card_mib: int) -> int:
        """VRAM cap on one card: floor(card × pct / 100), else min(memory-mib, card)."""
        if self.memory_percentage is not None and self.memory_percentage > 0:
            return math.floor(card_mib * self.memory_percentage.exact / 100)
        if self.memory_mib is not None and self.memory_mib > 0:
            return min(self.memory_mib.value(), card_mib)
        raise AllocationRefusedError(
            "a sliced request needs .sliced.memory-percentage or .sliced.memory-mib to cap the card's memory"
        )


def sliced_request(container: Mapping[str, Any], base: str) -> SlicedRequest:
    def get(kind: ResourceKind) -> Quantity | None:
        return limit(container, resource_name_for(base, kind))

    units = get(ResourceKind.SLICED_UNITS)
    cores = get(ResourceKind.SLICED_CORES_PERCENTAGE)
    return SlicedRequest(
        units=None if units is None else units.value(),
        cores_percentage=DEFAULT_CORES_PERCENTAGE if cores is None or cores <= 0 else min(cores.value(), 100),
        memory_percentage=get(ResourceKind.SLICED_MEMORY_PERCENTAGE),
        memory_mib=get(ResourceKind.SLICED_MEMORY_MIB),
    )


def card_demand(
    mode: DeviceAllocationMode,
    devices: Sequence[DeviceID],
    cards: Mapping[CardKey, CardInfo],
    sliced: SlicedRequest | None = None,
) -> dict[CardKey, int]:
    """Units per card for the kubelet's `devices` in `mode` (cards in first-seen order)."""
    demand: dict[CardKey, int] = {}
    for device in devices:
        key = device.card
        if mode is DeviceAllocationMode.EXCLUSIVE:
            demand[key] = RESOURCE_MAX_UNITS
        elif mode is DeviceAllocationMode.SHARED:
            demand[key] = demand.get(key, 0) + SHARED_UNITS
        elif mode is DeviceAllocationMode.SLICED:
            if sliced is None:
                raise ValueError("a sliced demand needs the container's sliced request")
            demand[key] = sliced.card_units(cards[key].memory_mib)
        else:
            demand[key] = 0
    return demand
