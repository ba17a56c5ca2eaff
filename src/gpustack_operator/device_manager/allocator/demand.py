"""How many units a container takes from each card it is given, and what a slice asks for.

Both are the card model's (rules.cards), the one the worker admits by: exclusive takes the whole card, a
share 160,000 units per token, and a slice the container's `<base>.sliced.units` on each card (the webhook
folds the memory request into it; without it the memory keys are folded here by the same `slice_units`,
which refuses a memory-mib larger than the card, as the webhook does). A slice also names its compute share
(`.sliced.cores-percentage`, default 100) and its VRAM cap (`.sliced.memory-percentage`, or
`.sliced.memory-mib`), which become HAMi-core limits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpustack_operator.api.quantity import Quantity
from gpustack_operator.api.types.devices import DeviceAllocationMode
from gpustack_operator.device_manager.allocator.pods import limit
from gpustack_operator.device_manager.plugin.handler import AllocationRefusedError
from gpustack_operator.device_manager.plugin.ids import DeviceID
from gpustack_operator.device_manager.plugin.inventory import CardInfo
from gpustack_operator.rules.cards import (
    DEFAULT_CORES_PERCENTAGE,
    Need,
    SliceUnitsError,
    slice_memory_limit_mib,
    slice_units,
)
from gpustack_operator.rules.naming.resources import ResourceKind, resource_name_for

CardKey = tuple[str, str]
MemoryFold = Callable[[Quantity | None, Quantity | None, int], int | None]
"""A card-model function of (memory-percentage, memory-mib, card MiB): units, or the VRAM cap."""


@dataclass(frozen=True)
class SlicedRequest:
    """A sliced container's `.sliced.*` limits."""

    units: int | None = None
    cores_percentage: int = DEFAULT_CORES_PERCENTAGE
    memory_percentage: Quantity | None = None
    memory_mib: Quantity | None = None

    def card_units(self, card_mib: int) -> int:
        """Units taken on one card: the folded `.sliced.units`, else the memory request folded here."""
        if self.units is not None and self.units > 0:
            return Need.of(DeviceAllocationMode.SLICED, self.units).units
        return self._fold(slice_units, card_mib, "")

    def memory_limit_mib(self, card_mib: int) -> int:
        """VRAM cap on one card: floor(card × pct / 100), else the memory-mib."""
        return self._fold(slice_memory_limit_mib, card_mib, " to cap the card's memory")

    def _fold(self, fold: MemoryFold, card_mib: int, purpose: str) -> int:
        """The card model's `fold` of this slice's memory keys; AllocationRefusedError saying why not."""
        try:
            value = fold(self.memory_percentage, self.memory_mib, card_mib)
        except SliceUnitsError as err:
            raise AllocationRefusedError(f"sliced request: {err}") from err
        if value is None:
            raise AllocationRefusedError(
                f"a sliced request needs .sliced.memory-percentage or .sliced.memory-mib{purpose}"
            )
        return value


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
        if mode is DeviceAllocationMode.SHARED:
            demand[key] = demand.get(key, 0) + Need.of(mode).units
        elif mode is DeviceAllocationMode.SLICED:
            if sliced is None:
                raise ValueError("a sliced demand needs the container's sliced request")
            demand[key] = sliced.card_units(cards[key].memory_mib)
        elif mode is DeviceAllocationMode.EXCLUSIVE:
            demand[key] = Need.of(mode).units
        else:
            demand[key] = 0
    return demand
