"""Cards -> Devices `spec.groups`: one group per group ID, the name of a card model everywhere above us.

The group is the unit everything above the device manager works in: node labels (`<mfr>-<id>.count`),
ResourceFlavors, device-plugin IDs (`<groupID>:<uuid>:<idx>`) and the ledger, so renaming a group
renames a pool under running work. Hence the rule:

**A card's group ID is a function of that card and GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY alone**
(``construct_group_id`` of its manufacturer, product name and VRAM; a name that normalises to nothing
takes its words from the card's PCI IDs, e.g. `pci-10de2330`), and the cards with one ID form one group.
Which other cards share the node never changes a group's ID.

Two kinds of card can share an ID: one product spelt two ways (`NVIDIA A100` and `A100`), or, with the
memory suffix off, one product in two VRAM sizes (an A100 40G next to an A100 80G), which the setting
means to be one model, as it already is across nodes. Devices keys its group list by (id, manufacturer),
so two groups with one ID would be rejected; they are one group instead, described by its smallest card
(least VRAM, then fewest cores), so every card can deliver what the group promises. Spelling alone merges
silently; a difference in VRAM, cores or compute capability is a collision, logged once per process as a
warning that names the fix (the memory suffix, when that splits them). A card the vendor library lost
(reported from PCI facts only, unhealthy) may share its siblings' ID; its unknown facts describe nothing
and collide with nothing, so it stays in its group, unchanged, until it heals.

The slicing feature comes from the manufacturer table and is left out when any card of the group that the
library describes cannot be soft-sliced (MIG enabled), or when no card has library detail. Output is
sorted, so the same cards always give the same groups and reporting never flaps.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gpustack_operator.api.types.devices import Accelerator, AcceleratorsFeature, DevicesGroup
from gpustack_operator.device_manager.model import Card
from gpustack_operator.rules.environ import DEFAULT_ENVIRON, Environ, env_flag
from gpustack_operator.rules.naming.groups import (
    GROUP_ID_WITH_MEMORY_ENV,
    construct_group_id,
    format_group_memory,
)
from gpustack_operator.rules.naming.manufacturers import manufacturer as lookup_manufacturer

log = logging.getLogger(__name__)


def group_id(card: Card, environ: Environ = DEFAULT_ENVIRON) -> str:
    """The ID of the group ``card`` belongs to, from the card alone (see the module docstring)."""
    unnamed = f"PCI {card.pci_id}" if card.pci_id else ""
    return construct_group_id(card.manufacturer, card.product, card.memory_mib, environ, unnamed=unnamed)


def _described(cards: Sequence[Card]) -> Sequence[Card]:
    """The cards whose facts are known (library detail), or all of them when none are."""
    return [card for card in cards if not card.detail_missing] or cards


def _kind(card: Card) -> tuple[str, int, str]:
    """What must agree for cards to be the same model: VRAM (to the group ID's GiB), cores, capability."""
    return format_group_memory(card.memory_mib), card.cores, card.compute_capability


@dataclass(frozen=True)
class Collision:
    """Cards of different kinds that share one group ID, and so are reported as one group."""

    manufacturer: str
    group_id: str
    kinds: tuple[str, ...]
    """Each kind as `<product> (<memory>, <cores> cores, cc <capability>)`, sorted."""
    memory_splits: bool
    """True when the memory suffix would give the kinds different IDs (it is off and VRAM differs)."""

    def message(self) -> str:
        fix = (
            f"set {GROUP_ID_WITH_MEMORY_ENV}=true to split them by VRAM (every group ID then ends -<N>g)"
            if self.memory_splits
            else "no setting splits them; the group describes its smallest card"
        )
        return (
            f"cards of different kinds share group ID {self.manufacturer}-{self.group_id} "
            f"({'; '.join(self.kinds)}): reported as one group sized by its smallest card; {fix}"
        )


def _describe(card: Card) -> str:
    memory, cores, capability = _kind(card)
    return f"{card.product or '?'} ({memory}, {cores} cores, cc {capability or '?'})"


def collision(gid: str, cards: Sequence[Card], environ: Environ = DEFAULT_ENVIRON) -> Collision | None:
    """The collision among the cards of group ``gid``, or None when they are all one kind."""
    cards = _described(cards)
    if len({_kind(card) for card in cards}) <= 1:
        return None
    memories = {format_group_memory(card.memory_mib) for card in cards}
    return Collision(
        cards[0].manufacturer,
        gid,
        tuple(sorted({_describe(card) for card in cards})),
        memory_splits=len(memories) > 1 and not env_flag(GROUP_ID_WITH_MEMORY_ENV, environ),
    )


class _WarnOnce:
    """Detection runs every period; a collision is a standing fact, worth one warning per process."""

    LIMIT = 256

    def __init__(self) -> None:
        self._seen: set[Collision] = set()

    def __call__(self, found: Collision) -> None:
        if found in self._seen:
            log.debug("%s", found.message())
            return
        if len(self._seen) < self.LIMIT:
            self._seen.add(found)
        log.warning("%s", found.message())


_warn = _WarnOnce()


def accelerator(card: Card) -> Accelerator:
    """The spec entry of one card: ID, index, device-node minors, topology and health."""
    return {
        "id": card.uuid,
        "index": card.index,
        "physicalIndexes": [card.minor if card.minor >= 0 else card.index],
        "topology": {
            "pciBusId": card.pci_bus_id,
            "pciRootId": card.pci_root,
            "pciClass": card.pci_class,
            "numaAffinity": card.numa_affinity,
            "cpuAffinity": card.cpu_affinity,
        },
        "status": {"unhealthy": not card.healthy},
    }


def sliced_feature(manufacturer: str, cards: Sequence[Card], environ: Environ) -> AcceleratorsFeature:
    """`{logicalSliced: {maxSize, coresPercentageOvercommit}}` when the described cards can be soft-sliced."""
    info = lookup_manufacturer(manufacturer, environ)
    if info is None or info.max_logical_slices <= 0 or not all(card.sliceable for card in _described(cards)):
        return {}
    return {
        "logicalSliced": {
            "maxSize": info.max_logical_slices,
            "coresPercentageOvercommit": info.compute_overcommit,
        }
    }


def _smallest(cards: Sequence[Card]) -> Card:
    """The card that describes the group: least VRAM, fewest cores, then a fixed order of the rest."""
    return min(
        _described(cards), key=lambda c: (c.memory_mib, c.cores, c.product, c.compute_capability, c.uuid)
    )


def _group(group_id: str, cards: Sequence[Card], environ: Environ) -> DevicesGroup:
    first = _smallest(cards)
    group: DevicesGroup = {
        "id": group_id,
        "manufacturer": first.manufacturer,
        "name": first.product,
        "memory": first.memory_mib,
    }
    optional = {
        "driverVersion": first.driver_version,
        "runtimeVersion": first.runtime_version,
        "computeCapability": first.compute_capability,
        "family": first.family,
    }
    if first.cores > 0:
        group["cores"] = first.cores
    group.update({key: value for key, value in optional.items() if value})  # type: ignore[typeddict-item]
    group["accelerators"] = [accelerator(card) for card in sorted(cards, key=lambda c: (c.index, c.uuid))]
    feature = sliced_feature(first.manufacturer, cards, environ)
    if feature:
        group["acceleratorsFeature"] = feature
    return group


def _members(cards: Iterable[Card], environ: Environ = DEFAULT_ENVIRON) -> dict[tuple[str, str], list[Card]]:
    """The cards of each group, keyed by (manufacturer, group ID): Devices' list-map key, never repeated."""
    members: dict[tuple[str, str], list[Card]] = {}
    for card in cards:
        members.setdefault((card.manufacturer, group_id(card, environ)), []).append(card)
    return members


def group_cards(cards: Iterable[Card], environ: Environ = DEFAULT_ENVIRON) -> list[DevicesGroup]:
    """Devices spec groups for ``cards``, sorted by manufacturer then group ID; collisions are warned of."""
    groups = []
    for (_, gid), members in sorted(_members(cards, environ).items()):
        found = collision(gid, members, environ)
        if found is not None:
            _warn(found)
        groups.append(_group(gid, members, environ))
    return groups
