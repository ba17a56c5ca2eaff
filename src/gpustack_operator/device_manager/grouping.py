"""Cards -> Devices `spec.groups`: one group per card model (product and VRAM) with the contract's group ID.

The group is the unit everything above the device manager works in: node labels (`<mfr>-<id>.count`),
ResourceFlavors, device-plugin IDs (`<groupID>:<uuid>:<idx>`) and the ledger. Its slicing feature comes
from the manufacturer table (NVIDIA 128 slices with compute overcommit, Cambricon 16 partitioned, ...),
and is left out when any card of the group cannot be soft-sliced (MIG enabled, or no library detail).
Output is sorted, so the same cards always give the same groups and reporting never flaps.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from gpustack_operator.api.types.devices import Accelerator, AcceleratorsFeature, DevicesGroup
from gpustack_operator.device_manager.model import Card
from gpustack_operator.nodefeature.environ import DEFAULT_ENVIRON, Environ
from gpustack_operator.nodefeature.groups import GROUP_ID_WITH_MEMORY_ENV, construct_group_id
from gpustack_operator.nodefeature.manufacturers import manufacturer as lookup_manufacturer


@dataclass
class _Model:
    first: Card
    cards: list[Card] = field(default_factory=list)


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


def sliced_feature(manufacturer: str, cards: Iterable[Card], environ: Environ) -> AcceleratorsFeature:
    """`{logicalSliced: {maxSize, coresPercentageOvercommit}}` when every card can be soft-sliced."""
    info = lookup_manufacturer(manufacturer, environ)
    if info is None or info.max_logical_slices <= 0 or not all(card.sliceable for card in cards):
        return {}
    return {
        "logicalSliced": {
            "maxSize": info.max_logical_slices,
            "coresPercentageOvercommit": info.compute_overcommit,
        }
    }


def _group(group_id: str, model: _Model, environ: Environ) -> DevicesGroup:
    first = model.first
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
    group["accelerators"] = [accelerator(card) for card in sorted(model.cards, key=lambda c: c.index)]
    feature = sliced_feature(first.manufacturer, model.cards, environ)
    if feature:
        group["acceleratorsFeature"] = feature
    return group


def group_cards(cards: Iterable[Card], environ: Environ = DEFAULT_ENVIRON) -> list[DevicesGroup]:
    """Devices spec groups for ``cards``, sorted by manufacturer then group ID.

    Two models whose names normalise to the same ID (same product, different VRAM) would collide in the
    list map (id, manufacturer); both then take the VRAM-suffixed ID, as with
    GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY=true.
    """
    models: dict[tuple[str, str, int], _Model] = {}
    for card in cards:
        key = (card.manufacturer, card.product, card.memory_mib)
        models.setdefault(key, _Model(card)).cards.append(card)
    ids = {key: construct_group_id(key[0], key[1], key[2], environ) for key in models}
    taken: dict[tuple[str, str], int] = {}
    for (mfr, _, _), group_id in ids.items():
        taken[(mfr, group_id)] = taken.get((mfr, group_id), 0) + 1
    with_memory = {**environ, GROUP_ID_WITH_MEMORY_ENV: "true"}
    for key, group_id in ids.items():
        if taken[(key[0], group_id)] > 1:
            ids[key] = construct_group_id(key[0], key[1], key[2], with_memory)
    groups = [_group(ids[key], model, environ) for key, model in models.items()]
    return sorted(groups, key=lambda g: (g["manufacturer"], g["id"]))
