"""Cards from an inventory file instead of hardware: the sandbox's fake GPU nodes, with injectable faults.

The sandbox describes each fake node's GPUs in its inventory YAML (`nodes[].gpus[]`: manufacturer,
product, count, memoryMiB; optionally cores, driverVersion, runtimeVersion, computeCapability, family,
pciClass, and `unhealthy`: the positions in the entry, from 0, of cards the vendor library flags), the same
facts every vendor's library gives the real backend. This backend turns the entry of one node into cards
with stable UUIDs (derived from node name,
manufacturer and index, so every restart and every test sees the same IDs), and lets tests make a card
unhealthy or vanish, through the API below or a faults file that a running device manager re-reads on
every detection: `{unhealthy: [uuid], missing: [uuid]}`. `unhealthy` stands for a card the vendor library
flags (an uncorrected ECC error, an XID-style fault), `missing` for one lost or gone from the bus (all of a
vendor's cards missing is its driver not loaded). Removing a UUID from the file (or the file) clears the
fault; the device manager then reports the card healthy once it has read healthy for its
`--health-recovery-checks`. The sandbox passes each GPU node's device manager
`<run dir>/nodes/<node>/faults.yaml`; `Faults.save` writes one atomically (UUIDs: `kubectl get devices`).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

import yaml

from gpustack_operator.device_manager.model import Card, DetectionError, Metrics

NAMESPACE: Final = uuid.UUID("6f1d8e2a-5b7c-4c1e-9a8d-2f3b4c5d6e7f")
"""Namespace of the simulated UUIDs (any fixed value works; this one is ours)."""

_OPTIONAL: Final = {
    "cores": "cores",
    "driverVersion": "driver_version",
    "runtimeVersion": "runtime_version",
    "computeCapability": "compute_capability",
    "family": "family",
}
DEFAULT_PCI_CLASS: Final = "0302"
"""A group's PCI class and subclass unless the inventory says (`pciClass`): a 3D controller."""


def simulated_uuid(node: str, manufacturer: str, index: int) -> str:
    """The UUID of card ``index`` of ``manufacturer`` on ``node`` (NVIDIA's carry NVML's `GPU-` prefix)."""
    value = str(uuid.uuid5(NAMESPACE, f"{node}/{manufacturer}/{index}"))
    return f"GPU-{value}" if manufacturer == "nvidia" else value


@dataclass
class Faults:
    """Cards (by UUID) that read unhealthy or are gone."""

    unhealthy: set[str] = field(default_factory=set)
    missing: set[str] = field(default_factory=set)

    @classmethod
    def load(cls, path: Path) -> Faults:
        """The faults file, or no faults when it does not exist."""
        try:
            doc = yaml.safe_load(path.read_text()) or {}
        except FileNotFoundError:
            return cls()
        except (OSError, yaml.YAMLError) as exc:
            raise DetectionError(f"cannot read faults file {path}: {exc}") from exc
        return cls(set(map(str, doc.get("unhealthy") or [])), set(map(str, doc.get("missing") or [])))

    def save(self, path: Path) -> None:
        """Write the faults file so a reader never sees it half-written (a temp file renamed over it)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temp.write_text(
            yaml.safe_dump({"unhealthy": sorted(self.unhealthy), "missing": sorted(self.missing)})
        )
        temp.replace(path)

    def merged(self, other: Faults) -> Faults:
        return Faults(self.unhealthy | other.unhealthy, self.missing | other.missing)


def _node_gpus(path: Path, node: str) -> list[Mapping[str, Any]]:
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise DetectionError(f"cannot read inventory {path}: {exc}") from exc
    for entry in (doc or {}).get("nodes") or []:
        if entry.get("name") == node:
            return list(entry.get("gpus") or [])
    raise DetectionError(f"node {node} is not in inventory {path}")


def _cards(node: str, gpus: list[Mapping[str, Any]]) -> list[Card]:
    cards: list[Card] = []
    next_index: dict[str, int] = {}
    for gpu in gpus:
        mfr = str(gpu["manufacturer"]).lower()
        extra: dict[str, Any] = {attr: str(gpu[key]) for key, attr in _OPTIONAL.items() if key in gpu}
        if "cores" in extra:
            extra["cores"] = int(gpu["cores"])
        unhealthy = {int(position) for position in gpu.get("unhealthy") or []}
        pci_class = str(gpu.get("pciClass", DEFAULT_PCI_CLASS)).lower().ljust(6, "0")
        for position in range(int(gpu["count"])):
            index = next_index.get(mfr, 0)
            next_index[mfr] = index + 1
            cards.append(
                Card(
                    manufacturer=mfr,
                    product=str(gpu["product"]),
                    memory_mib=int(gpu["memoryMiB"]),
                    uuid=simulated_uuid(node, mfr, index),
                    index=index,
                    minor=index,
                    pci_bus_id=f"0000:{0x18 + len(cards):02x}:00.0",
                    pci_class=pci_class,
                    pci_root="0000:00",
                    numa_affinity="0",
                    healthy=position not in unhealthy,
                    **extra,
                )
            )
    return cards


class SimulatedBackend:
    """The cards the inventory gives ``node``, minus missing ones, with unhealthy ones marked."""

    name = "simulated"

    def __init__(self, inventory: Path, node: str, faults_file: Path | None = None) -> None:
        self.inventory = inventory
        self.node = node
        self.faults_file = faults_file
        self.faults = Faults()

    def mark_unhealthy(self, card_uuid: str) -> None:
        self.faults.unhealthy.add(card_uuid)

    def remove(self, card_uuid: str) -> None:
        self.faults.missing.add(card_uuid)

    def clear_faults(self) -> None:
        self.faults = Faults()

    def detect(self) -> list[Card]:
        try:
            cards = _cards(self.node, _node_gpus(self.inventory, self.node))
        except (KeyError, TypeError, ValueError) as exc:
            raise DetectionError(
                f"inventory {self.inventory}, node {self.node}: bad gpus entry: {exc}"
            ) from exc
        faults = self.faults.merged(Faults.load(self.faults_file)) if self.faults_file else self.faults
        return [
            replace(card, healthy=card.healthy and card.uuid not in faults.unhealthy)
            for card in cards
            if card.uuid not in faults.missing
        ]

    def metrics(self) -> list[Metrics]:
        """Idle cards: full VRAM free, no utilisation."""
        return [
            Metrics(c.manufacturer, c.uuid, c.index, c.healthy, c.memory_mib, 0, 0) for c in self.detect()
        ]
