"""Who holds each card right now, and in which mode: the allocator's cross-mode view.

The kubelet accounts each resource separately, so it will happily hand a sliced token of a card that an
exclusive pod owns. Before reserving, the allocator checks the cards against this view, built the way the
ledger is (contract §2.5: seed every card free with 1,600,000 units, apply each pod's recorded mode and
units, a pod whose mode conflicts with a card's is skipped), from the pod annotations plus the in-process
reservations whose annotations have not landed yet. Pods that finished (Succeeded, Failed) hold nothing:
the kubelet has already taken their devices back.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gpustack_operator.api.types.devices import DeviceAllocationMode
from gpustack_operator.device_manager.allocator.annotation import ContainerAllocation
from gpustack_operator.nodefeature.credits import RESOURCE_MAX_UNITS

log = logging.getLogger(__name__)

CardKey = tuple[str, str]
NONE = DeviceAllocationMode.NONE


@dataclass
class Holding:
    """One card: its mode, the units still free, and the pods holding it."""

    mode: DeviceAllocationMode = NONE
    remaining: int = RESOURCE_MAX_UNITS
    holders: list[str] = field(default_factory=list)


class Holdings:
    """Per-card holdings built from allocations, in the ledger's order and with its conflict rule."""

    def __init__(self) -> None:
        self._cards: dict[CardKey, Holding] = {}

    def get(self, key: CardKey) -> Holding:
        return self._cards.get(key) or Holding()

    def add_pod(self, holder: str, allocations: Mapping[str, ContainerAllocation]) -> bool:
        """Apply one pod's containers (in name order); False, and nothing applied, on a mode conflict."""
        charges: dict[CardKey, int] = {}
        modes: dict[CardKey, DeviceAllocationMode] = {}
        for name in sorted(allocations):
            alloc = allocations[name]
            for card in alloc.cards:
                held = self.get(card.key).mode
                if held not in (NONE, alloc.mode) or modes.get(card.key, alloc.mode) is not alloc.mode:
                    log.warning(
                        "skipping holder=%s: card %s is held %s, it claims %s",
                        holder,
                        card.uuid,
                        held.label,
                        alloc.mode.label,
                    )
                    return False
                modes[card.key] = alloc.mode
                charges[card.key] = charges.get(card.key, 0) + card.units
        for key, units in charges.items():
            holding = self._cards.setdefault(key, Holding())
            holding.mode = modes[key]
            holding.remaining = max(holding.remaining - units, 0)
            holding.holders.append(holder)
        return True

    def conflicts(self, keys: Iterable[CardKey], mode: DeviceAllocationMode) -> dict[CardKey, Holding]:
        """The cards among `keys` already held in a mode other than `mode`."""
        return {key: self.get(key) for key in keys if self.get(key).mode not in (NONE, mode)}

    def fits(self, demand: Mapping[CardKey, int], mode: DeviceAllocationMode) -> bool:
        """True when every card is free or held in `mode` and has the units the demand takes from it."""
        return not self.conflicts(demand, mode) and all(
            self.get(key).remaining >= units for key, units in demand.items()
        )
