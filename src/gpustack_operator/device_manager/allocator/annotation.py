"""The durable record of an allocation: the pod annotation `device.gpustack.ai/accelerator.allocated`.

The kubelet keeps no record a plugin can read back with the pod's identity, and a restarted device
manager must lose nothing, so every workload Allocate is written onto its pod as JSON:
`{containerName: {"devices": DevicesStatus, "deviceIDs": [...]}}` (contract §2.5), where the
DevicesStatus lists each card the container holds with its mode and the units it consumes. The ledger
(Devices.status) is rebuilt from these annotations alone. Visibility allocations are never recorded.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpustack_operator.api.keys import ACCELERATOR_ALLOCATED_ANNOTATION
from gpustack_operator.api.types.devices import (
    AcceleratorAllocation,
    DeviceAllocationMode,
    DevicesAllocationGroup,
    DevicesStatus,
)
from gpustack_operator.device_manager.allocator.pods import meta, pod_key

log = logging.getLogger(__name__)

ANNOTATION = ACCELERATOR_ALLOCATED_ANNOTATION


@dataclass(frozen=True)
class AllocatedCard:
    """One card a container holds and the units it consumes there."""

    group: str
    manufacturer: str
    uuid: str
    index: int
    units: int

    @property
    def key(self) -> tuple[str, str]:
        return self.group, self.uuid

    @property
    def node_index(self) -> int:
        """The record keeps the library's index only; the driver's number is the inventory's
        (`Planner.mirror` names a card it still has by its `CardInfo`)."""
        return self.index


@dataclass(frozen=True)
class ContainerAllocation:
    """What one container was given: the mode, the cards with their units, and the kubelet's IDs."""

    mode: DeviceAllocationMode
    cards: tuple[AllocatedCard, ...]
    device_ids: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        groups: dict[tuple[str, str], DevicesAllocationGroup] = {}
        for card in self.cards:
            group = groups.setdefault(
                (card.group, card.manufacturer),
                {"id": card.group, "manufacturer": card.manufacturer, "accelerators": []},
            )
            entry: AcceleratorAllocation = {"id": card.uuid, "index": card.index, "mode": int(self.mode)}
            if card.units:
                entry["allocated"] = card.units
            group.setdefault("accelerators", []).append(entry)
        devices: DevicesStatus = {"groups": list(groups.values())}
        return {"devices": devices, "deviceIDs": list(self.device_ids)}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ContainerAllocation:
        cards: list[AllocatedCard] = []
        modes: set[int] = set()
        for group in doc["devices"].get("groups") or []:
            for acc in group.get("accelerators") or []:
                modes.add(int(acc["mode"]))
                cards.append(
                    AllocatedCard(
                        group["id"],
                        group["manufacturer"],
                        acc["id"],
                        int(acc["index"]),
                        int(acc.get("allocated", 0)),
                    )
                )
        if len(modes) != 1:
            raise ValueError(f"a container allocation holds cards in one mode, got modes {sorted(modes)}")
        return cls(DeviceAllocationMode(modes.pop()), tuple(cards), tuple(doc.get("deviceIDs") or ()))


def encode(allocations: Mapping[str, ContainerAllocation]) -> str:
    """The annotation value: containers in name order, compact JSON."""
    return json.dumps(
        {name: allocations[name].to_json() for name in sorted(allocations)}, separators=(",", ":")
    )


def decode(text: str) -> dict[str, ContainerAllocation]:
    """Parse an annotation value; ValueError when it is not one we wrote."""
    return dict(_decode(text))


@functools.lru_cache(maxsize=8192)
def _decode(text: str) -> tuple[tuple[str, ContainerAllocation], ...]:
    """Immutable, so cached: every Allocate reads every pod's annotation, and they rarely change."""
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict):
            raise ValueError("want a JSON object of containers")
        return tuple((name, ContainerAllocation.from_json(entry)) for name, entry in doc.items())
    except (KeyError, TypeError, AttributeError, ValueError) as err:
        raise ValueError(f"malformed {ANNOTATION} annotation: {err}") from err


def read_allocations(pod: Mapping[str, Any]) -> dict[str, ContainerAllocation]:
    """The allocations recorded on a pod ({} when none); ValueError when the annotation is unreadable."""
    text = (meta(pod).get("annotations") or {}).get(ANNOTATION)
    return decode(text) if text else {}


def pod_allocations(pod: Mapping[str, Any]) -> dict[str, ContainerAllocation]:
    """`read_allocations`, logging an unreadable annotation and reading it as none."""
    try:
        return read_allocations(pod)
    except ValueError as err:
        log.warning("ignoring allocation pod=%s: %s", pod_key(pod), err)
        return {}
