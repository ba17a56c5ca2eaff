"""The cards one manufacturer's resource servers advertise, kept current by the detect loop.

Detection reports Devices `spec.groups`; the resource servers, the preferred-allocation policy and the
allocator all need the same cards as flat records (group, UUID, index, VRAM, CUDA version, health, slices)
and need to hear when they change, so ListAndWatch can resend its list. This is that shared, observable
view: `update()` takes fresh groups, bumps a version only when something a server advertises changed, and
wakes every waiter.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass

from gpustack_operator.api.types.devices import AcceleratorsFeature, DevicesGroup


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
        self._version = 0
        self._changed = asyncio.Event()

    @property
    def version(self) -> int:
        return self._version

    def cards(self) -> list[CardInfo]:
        return list(self._cards.values())

    def card(self, key: tuple[str, str]) -> CardInfo | None:
        return self._cards.get(key)

    def update(self, groups: Iterable[DevicesGroup]) -> bool:
        """Replace the cards with those in `groups`; True (and waiters woken) when anything changed."""
        fresh = {c.key: c for c in cards_of(groups, self.manufacturer)}
        if fresh == self._cards:
            return False
        self._cards = fresh
        self._version += 1
        event, self._changed = self._changed, asyncio.Event()
        event.set()
        return True

    async def wait_changed(self, seen: int) -> int:
        """Return the current version as soon as it differs from `seen`."""
        while self._version == seen:
            await self._changed.wait()
        return self._version
