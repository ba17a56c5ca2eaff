"""The cards one manufacturer's resource servers advertise, kept current by the detect loop.

Detection reports Devices `spec.groups`; the resource servers, the preferred-allocation policy and the
allocator all need the same cards as flat records (group, UUID, index, VRAM, CUDA version, health, slices)
and need to hear when they change, so ListAndWatch can resend its list. This is that shared, observable
view: `update()` takes fresh groups, bumps a version only when something a server advertises changed, and
wakes every waiter.

It also carries the mode each card is held in now (`set_held`, from the allocator's Holdings): a card held
in one mode cannot serve another (the card model, rules.cards), so a resource server advertises such a
card's tokens Unhealthy under the other modes' resources (`serves`). The kubelet publishes allocatable =
healthy devices per resource, so kube-scheduler's own accounting then sees, per node, how many cards each
resource can really take: a half-sliced node offers 4 `nvidia.com/gpu`, not 8. A card held in a mode keeps
that mode's tokens healthy (the holders' requests already count against them; marking them would count
the card twice).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpustack_operator.api.types.devices import AcceleratorsFeature, DeviceAllocationMode, DevicesGroup

NONE = DeviceAllocationMode.NONE
VISIBILITY = DeviceAllocationMode.VISIBILITY


@dataclass(frozen=True)
class CardInfo:
    """One card as the device plugin sees it."""

    group: str
    manufacturer: str
    uuid: str
    index: int
    memory_mib: int
    runtime_version: str
    healthy: bool
    max_slices: int
    numa_node: int | None = None
    family: str = ""
    """The group's product family (`910B`), which picks a vendor runtime build."""
    physical_index: int = -1
    """The driver's own number for the card (`physicalIndexes[0]`: NVIDIA's device minor, the DRM card
    minor of AMD's `/dev/dri/cardN`); -1 when detection did not say."""

    @property
    def node_index(self) -> int:
        """The number the card's device nodes carry: the driver's, else the vendor library's index."""
        return self.physical_index if self.physical_index >= 0 else self.index

    @property
    def key(self) -> tuple[str, str]:
        return self.group, self.uuid


def max_slices(feature: AcceleratorsFeature | None) -> int:
    """MaxSlices(): the larger of the physical and logical slice counts (0 when unsliceable)."""
    if not feature:
        return 0
    modes = (feature.get("physicalSliced"), feature.get("logicalSliced"))
    return max((int(mode["maxSize"]) for mode in modes if mode), default=0)


def _numa(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def cards_of(groups: Iterable[DevicesGroup], manufacturer: str) -> list[CardInfo]:
    """The cards of `manufacturer` in Devices spec groups, ordered by group then card index."""
    cards = []
    for group in groups:
        if group["manufacturer"] != manufacturer:
            continue
        slices = max_slices(group.get("acceleratorsFeature"))
        for acc in group.get("accelerators", []):
            cards.append(
                CardInfo(
                    group=group["id"],
                    manufacturer=manufacturer,
                    uuid=acc["id"],
                    index=int(acc["index"]),
                    memory_mib=int(group["memory"]),
                    runtime_version=group.get("runtimeVersion", ""),
                    healthy=not acc.get("status", {}).get("unhealthy", False),
                    max_slices=slices,
                    numa_node=_numa(acc.get("topology", {}).get("numaAffinity", "")),
                    family=group.get("family", ""),
                    physical_index=next(iter(acc.get("physicalIndexes") or []), -1),
                )
            )
    return sorted(cards, key=lambda c: (c.group, c.index, c.uuid))


class Inventory:
    """The current cards of one manufacturer, with a change signal for ListAndWatch streams."""

    def __init__(self, manufacturer: str, groups: Iterable[DevicesGroup] = ()) -> None:
        self.manufacturer = manufacturer
        self._cards: dict[tuple[str, str], CardInfo] = {c.key: c for c in cards_of(groups, manufacturer)}
        self._held: dict[tuple[str, str], DeviceAllocationMode] = {}
        self._version = 0
        self._changed = asyncio.Event()

    @property
    def version(self) -> int:
        return self._version

    def cards(self) -> list[CardInfo]:
        return list(self._cards.values())

    def card(self, key: tuple[str, str]) -> CardInfo | None:
        return self._cards.get(key)

    def serves(self, card: CardInfo, mode: DeviceAllocationMode) -> bool:
        """The card is healthy and can serve `mode` now: free, or held in that mode (visibility mirrors a
        main container, so it only follows the card's health)."""
        return card.healthy and (mode is VISIBILITY or self._held.get(card.key, NONE) in (NONE, mode))

    def update(self, groups: Iterable[DevicesGroup]) -> bool:
        """Replace the cards with those in `groups`; True (and waiters woken) when anything changed."""
        fresh = {c.key: c for c in cards_of(groups, self.manufacturer)}
        if fresh == self._cards:
            return False
        self._cards = fresh
        self._bump()
        return True

    def set_held(self, held: Mapping[tuple[str, str], DeviceAllocationMode]) -> bool:
        """The mode each card is held in now (cards not named are free); True (and waiters woken) when that
        changed (kept for cards detection has not reported yet, too)."""
        mine = {key: mode for key, mode in held.items() if mode is not NONE}
        if mine == self._held:
            return False
        self._held = mine
        self._bump()
        return True

    def _bump(self) -> None:
        self._version += 1
        event, self._changed = self._changed, asyncio.Event()
        event.set()

    async def wait_changed(self, seen: int) -> int:
        """Return the current version as soon as it differs from `seen`."""
        while self._version == seen:
            await self._changed.wait()
        return self._version
