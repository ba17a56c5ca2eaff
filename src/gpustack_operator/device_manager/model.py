"""What detection hands to the rest of the device manager: one record per physical card.

Detectors (NVML, amdsmi, a PCI scan, the simulated backend) differ in how much they can say; they all return
`Card`s, and everything downstream (grouping into Devices groups, node labels, device-plugin IDs, allocation
responses) works from these records alone, so a backend is swappable and tests need no hardware.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Card:
    """One accelerator as a detector sees it. Unknown facts stay at their zero value."""

    manufacturer: str
    """Lower-case manufacturer key (`nvidia`, `ascend`, ...)."""
    product: str
    """Product name as the vendor library reports it (`NVIDIA H100 80GB HBM3`)."""
    memory_mib: int
    uuid: str
    index: int
    """The vendor library's index of the card on this node."""
    minor: int = -1
    """Device node minor number (`/dev/nvidia<minor>`); -1 when unknown."""
    pci_bus_id: str = ""
    """Domain:bus:device.function as sysfs spells it (`0000:3b:00.0`)."""
    pci_class: str = ""
    numa_affinity: str = ""
    cpu_affinity: str = ""
    cores: int = 0
    driver_version: str = ""
    runtime_version: str = ""
    compute_capability: str = ""
    family: str = ""
    healthy: bool = True
    sliceable: bool = True
    """False when the card cannot be logically sliced (e.g. MIG is enabled on it)."""
    detail_missing: str = ""
    """Why vendor-library detail is absent (e.g. the library is not installed); "" when complete."""
    pci_root: str = ""
    """The PCI host bridge (domain:bus) the card hangs under (`0000:3a`); "" when unknown."""
    pci_id: str = ""
    """PCI vendor and device IDs (`10de:2330`); "" when unknown. They name a card whose product is unnamed."""


@dataclass(frozen=True)
class Metrics:
    """One card's live readings for `device-manager monitor`. Unreadable values stay at -1."""

    manufacturer: str
    uuid: str
    index: int
    healthy: bool
    memory_total_mib: int = -1
    memory_used_mib: int = -1
    utilization_percent: int = -1
    """Compute (SM / core) busy share over the library's last sample window."""
    temperature_c: int = -1


class Backend(Protocol):
    """A source of cards: a vendor library, the PCI bus, or an inventory file."""

    name: str

    def detect(self) -> list[Card]:
        """All cards this backend can see now. Raises DetectionError when the source itself fails."""
        ...


class DetectionError(RuntimeError):
    """A backend could not be read at all (not: a card is unhealthy, which is a fact about the card)."""
