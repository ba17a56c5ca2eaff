"""The kubelet's device IDs checked against this node's cards, before any pod is looked at.

An Allocate the plugin cannot honour must fail with FAILED_PRECONDITION and change nothing: IDs it never
advertised for the resource's mode, tokens of an unhealthy card (the visibility resource excepted: it
only mirrors cards a pod already holds), and a sliced request whose tokens fall on fewer cards than it
asks for. A slice is one token on each of `limit` distinct cards; two tokens of one card would silently
become a single slice, leaving the container with fewer cards than the scheduler accounted for.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpustack_operator.api.types.devices import DeviceAllocationMode
from gpustack_operator.device_manager.plugin import ids
from gpustack_operator.device_manager.plugin.handler import AllocationRefusedError, ResourceSpec
from gpustack_operator.device_manager.plugin.inventory import CardInfo, Inventory

CardKey = tuple[str, str]


def resolve(
    resource: ResourceSpec, inventory: Inventory | None, device_ids: Sequence[str]
) -> tuple[list[ids.DeviceID], dict[CardKey, CardInfo]]:
    """The parsed IDs and their cards (first-seen order); AllocationRefusedError when one is not servable."""
    if inventory is None or not device_ids:
        raise AllocationRefusedError(f"{resource.name}: no devices of {resource.manufacturer} to allocate")
    devices: list[ids.DeviceID] = []
    cards: dict[CardKey, CardInfo] = {}
    for device_id in device_ids:
        try:
            device = ids.parse_id(device_id)
        except ids.InvalidDeviceIDError as err:
            raise AllocationRefusedError(f"{resource.name}: {err}") from err
        card = inventory.card(device.card)
        if card is None or not ids.valid_in(device, resource.mode, card.max_slices):
            raise AllocationRefusedError(f"{resource.name}: unknown device {device_id!r}")
        if not card.healthy and resource.mode is not DeviceAllocationMode.VISIBILITY:
            raise AllocationRefusedError(f"{resource.name}: device {device_id} is on unhealthy card")
        devices.append(device)
        cards.setdefault(card.key, card)
    if resource.mode is DeviceAllocationMode.SLICED and len(cards) < len(devices):
        raise AllocationRefusedError(
            f"{resource.name}: {len(devices)} slices asked for but the devices fall on {len(cards)} "
            f"card(s) ({', '.join(card.uuid for card in cards.values())}); a slice takes one token on "
            "each of distinct cards"
        )
    return devices, cards
