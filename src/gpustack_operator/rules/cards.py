"""The one card model: what a need takes of a card, and whether a card can give it now; pure.

The worker admits by these rules (the per-card admission placement, the promises it keeps, the InstanceType
views, the Pod webhook's memory fold) and the device manager allocates by them (Allocate's demand, its
cross-mode holdings, GetPreferredAllocation). They used to be written once on each side, and the copies
drifted: a worker that admits by one rule and a device manager that allocates by another is the very
overcommit this product exists to prevent. A test drives the same generated requests through both sides
and requires the same card, card for card (tests/unit/test_card_agreement.py).

The ledger counts in units, D = 1,600,000 per card. A need is a mode and the units it takes of one card:
exclusive the whole card, a share a tenth (160,000), a slice its `.sliced.units` (at least one unit, at
most the card). A card is in one mode at a time (`DeviceAllocationMode`, the ledger's own enum, is the one
mode type: NONE for a free card). It can give a need when it is healthy and either free (all its units
left: an exclusive need takes only that) or held in the need's mode with the units left; a slice also needs
a card that can be sliced at all. `remaining` may be negative: a card whose holders were given more than it
has (an older version's records) gives nothing until enough of them finish.

A slice names its memory as a percentage of the card or in MiB; `slice_units` folds either into units
(contract §4.4). Over 100 % or more MiB than the card has is refused, here and everywhere: capping it would
give the container less VRAM than it asked for while telling it nothing, and charging it a whole card would
hide the mistake in the ledger. The compute share defaults to 100 %.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Final

from gpustack_operator.api.quantity import Quantity
from gpustack_operator.api.types.devices import DeviceAllocationMode as Mode

__all__ = [
    "CARD_UNITS",
    "DEFAULT_CORES_PERCENTAGE",
    "ENDED_PHASES",
    "MEMORY_PERCENT_UNITS",
    "MIB",
    "SHARED_UNITS",
    "SHARES_PER_CARD",
    "CardState",
    "Mode",
    "Need",
    "SliceUnitsError",
    "best_card",
    "card_mode_label",
    "holds_cards",
    "merged_resources",
    "slice_memory_limit_mib",
    "slice_units",
]

CARD_UNITS: Final = 1_600_000
"""D: the units of one whole card, a free card's ledger `remaining` (2^9·5^5: a share, 1 % and 1/512 of a card
are whole numbers)."""
SHARES_PER_CARD: Final = 10
SHARED_UNITS: Final = CARD_UNITS // SHARES_PER_CARD
"""Units one owner share takes (160,000)."""
MEMORY_PERCENT_UNITS: Final = CARD_UNITS // 100
"""Units of 1 % of a card's VRAM (16,000)."""
MIB: Final = 2**20
DEFAULT_CORES_PERCENTAGE: Final = 100
"""The compute share a slice gets when it names none."""


ENDED_PHASES: Final = frozenset({"Succeeded", "Failed"})
"""Pod phases in which the kubelet has taken a Pod's cards back."""


def holds_cards(pod_phase: str) -> bool:
    """A Pod in `pod_phase` still holds the cards its allocation annotation records: until it has ended (a
    terminating Pod's containers may still run). The ledger counts these Pods; the card view names them."""
    return pod_phase not in ENDED_PHASES


def card_mode_label(mode: Mode) -> str:
    """The mode as users write it in messages: `exclusive`, `shared`, `sliced`."""
    return mode.label.lower()


@dataclass(frozen=True)
class Need:
    """One card a Pod (or a container) needs: in which mode, and how many of the card's units it takes."""

    mode: Mode
    units: int

    @classmethod
    def of(cls, mode: Mode, sliced_units: int = 0) -> Need:
        """The need of one card in `mode`; a slice takes `sliced_units`, at least 1 and at most the card."""
        if mode is Mode.EXCLUSIVE:
            return cls(mode, CARD_UNITS)
        if mode is Mode.SHARED:
            return cls(mode, SHARED_UNITS)
        if mode is Mode.SLICED:
            return cls(mode, min(max(sliced_units, 1), CARD_UNITS))
        raise ValueError(f"a Pod does not ask cards in mode {mode.label}")


@dataclass(frozen=True)
class CardState:
    """One card as the ledger says: the units left, its mode, and whether it can serve at all."""

    remaining: int = CARD_UNITS
    """Units left; negative when its holders were given more than it has."""
    mode: int = Mode.NONE
    """A `DeviceAllocationMode` value, as the ledger writes it (a mode this version does not know serves
    nothing but keeps its place)."""
    sliceable: bool = True
    """Logically sliceable (its group advertises slices); a card that is not takes no slice."""
    healthy: bool = True
    index: int = 0
    """The card's index on its node: among equally good cards the lower index is taken."""

    @property
    def room(self) -> int:
        """The units it can still give: its remaining, none when oversold (negative) or unhealthy."""
        return max(self.remaining, 0) if self.healthy else 0

    @property
    def free(self) -> bool:
        """Untouched and healthy: a whole card's units left (an exclusive need can take it)."""
        return self.healthy and self.remaining >= CARD_UNITS

    def serves(self, mode: Mode) -> bool:
        """It can give needs of `mode` now, room permitting: healthy, free or already held in `mode`."""
        if mode == Mode.EXCLUSIVE:
            return self.free
        if mode == Mode.SLICED and not self.sliceable:
            return False
        return self.free or (self.healthy and self.mode == mode)

    def can_take(self, need: Need) -> bool:
        """It can give `need` now."""
        return self.serves(need.mode) and self.remaining >= need.units

    def take(self, need: Need) -> CardState:
        """The card once `need` is taken from it (call only when it `can_take` the need)."""
        return replace(self, mode=need.mode, remaining=self.remaining - need.units)


def best_card(cards: Iterable[tuple[str, CardState]], need: Need) -> str | None:
    """The card to give `need`: among those that can take it, one already held in its mode before a free
    one, then the one with the least units left (packing), then the lowest index; None when none can."""
    ranked = [(state.free, state.remaining, state.index, key) for key, state in cards if state.can_take(need)]
    return min(ranked)[3] if ranked else None


class SliceUnitsError(ValueError):
    """A slice's memory cannot become units; the message says why."""


def slice_units(
    memory_percentage: Quantity | None, memory_mib: Quantity | None, card_mib: int | None
) -> int | None:
    """Units a slice takes of one card (contract §4.4), or None when neither memory key is set.

    A positive memory-percentage wins: pct × D / 100 (over 100 is refused). Otherwise a positive
    memory-mib is divided by the card's VRAM (`card_mib`, which the caller resolves only in that case;
    unknown, or smaller than the request, is refused). A demand that rounds to no unit is refused.
    """
    if memory_percentage is not None and memory_percentage > 0:
        if memory_percentage > 100:
            raise SliceUnitsError(f"memory-percentage {memory_percentage} is over 100")
        units = math.floor(memory_percentage.exact * MEMORY_PERCENT_UNITS)
    elif memory_mib is not None and memory_mib > 0:
        if card_mib is None or card_mib <= 0:
            raise SliceUnitsError("memory-mib needs the card's VRAM, which the InstanceType does not give")
        if memory_mib > card_mib:
            raise SliceUnitsError(f"memory-mib {memory_mib} exceeds the card's {card_mib}Mi")
        units = math.floor(memory_mib.exact * CARD_UNITS / card_mib)
    else:
        return None
    if units <= 0:
        raise SliceUnitsError("the memory request is less than one unit of a card")
    return units


def slice_memory_limit_mib(
    memory_percentage: Quantity | None, memory_mib: Quantity | None, card_mib: int
) -> int | None:
    """The VRAM cap of a slice on a card of `card_mib` (what HAMi-core enforces): floor(card × pct / 100),
    else the memory-mib; None when neither is set. Refused as `slice_units` refuses."""
    if slice_units(memory_percentage, memory_mib, card_mib) is None:
        return None
    if memory_percentage is not None and memory_percentage > 0:
        return math.floor(card_mib * memory_percentage.exact / 100)
    assert memory_mib is not None
    return memory_mib.value()


def merged_resources(container: Mapping[str, object]) -> dict[str, object]:
    """A container's resources as one mapping: requests overlaid with limits (extended resources are asked in
    limits, and Kubernetes copies them to requests)."""
    resources = container.get("resources")
    if not isinstance(resources, Mapping):
        return {}
    requests, limits = resources.get("requests"), resources.get("limits")
    return {
        **(requests if isinstance(requests, Mapping) else {}),
        **(limits if isinstance(limits, Mapping) else {}),
    }
