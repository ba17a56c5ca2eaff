"""Recorded sysfs trees: the PCI bus as /sys/bus/pci/devices shows it, for every vendor's tests.

Each vendor's library answers are recorded beside this module (``recorded_nvml``, ``recorded_dcmi``, ...).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SysfsDevice:
    """One PCI function as /sys/bus/pci/devices/<address> shows it."""

    address: str
    vendor: str
    device: str
    pci_class: str
    numa_node: str = "0"
    cpulist: str = "0-47,96-143"
    bridge: str = "0000:17"


def build_sysfs(root: Path, devices: Iterable[SysfsDevice]) -> Path:
    """A sysfs tree under ``root`` whose bus/pci/devices entries link into devices/pci<bridge>/..."""
    listing = root / "bus" / "pci" / "devices"
    listing.mkdir(parents=True, exist_ok=True)
    for dev in devices:
        real = root / "devices" / f"pci{dev.bridge}" / f"{dev.bridge}:00.0" / dev.address
        real.mkdir(parents=True)
        for name, value in {
            "vendor": f"0x{dev.vendor}",
            "device": f"0x{dev.device}",
            "class": f"0x{dev.pci_class}",
            "numa_node": dev.numa_node,
            "local_cpulist": dev.cpulist,
        }.items():
            (real / name).write_text(value + "\n")
        (listing / dev.address).symlink_to(real)
    return root
