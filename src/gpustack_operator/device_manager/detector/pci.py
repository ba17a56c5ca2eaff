"""The PCI bus as sysfs shows it: which accelerators are plugged in, whatever their vendor library says.

Every vendor library can be missing, too old or broken on a node; the bus cannot. Scanning
``/sys/bus/pci/devices`` for the manufacturers' vendor IDs and the accelerator class prefixes
(``GPUSTACK_PCI_CLASS_PREFIXES``) tells us a card is there, where it sits (NUMA node, local CPUs, host
bridge) and, through pyudev's hardware database where udev runs, its marketing name. Library detectors
use it to fill in topology; when a library is unusable the card is still reported from these facts.

The names are read once per set of PCI addresses (``BusNames``) and again only when the bus changes:
reading udev's database on every detection grew the device manager's resident set by about 1.35 MB over
the first thousand detections (libudev's allocations, not Python objects), and a name does not change
while the card stays in its slot.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from gpustack_operator.device_manager.model import Card
from gpustack_operator.rules.naming.manufacturers import Manufacturer

log = logging.getLogger(__name__)

SYSFS = Path("/sys")

ModelNames = Callable[[], Mapping[str, str]]
"""Where product names come from: PCI address -> name (the udev hardware database by default)."""


@dataclass(frozen=True)
class PciDevice:
    """One PCI function, with the facts sysfs gives without a driver library."""

    address: str
    """`0000:3b:00.0`."""
    vendor: str
    """Four lower-case hex digits (`10de`)."""
    device: str
    pci_class: str
    """Six lower-case hex digits (`030200`)."""
    numa_node: str = ""
    cpu_affinity: str = ""
    root: str = ""
    """Host bridge domain:bus (`0000:3a`)."""
    model: str = ""
    """Product name from the hardware database; "" when unknown."""

    @property
    def pci_id(self) -> str:
        """`<vendor>:<device>` (`10de:2330`)."""
        return f"{self.vendor}:{self.device}"

    def belongs_to(self, manufacturer: Manufacturer, class_prefixes: Iterable[str]) -> bool:
        """True when vendor and class say this function is one of ``manufacturer``'s accelerators."""
        if self.vendor != manufacturer.pci_vendor_id:
            return False
        if manufacturer.pci_class:
            return self.pci_class.startswith(manufacturer.pci_class)
        return any(self.pci_class.startswith(prefix) for prefix in class_prefixes)


def normalize_bus_id(text: str) -> str:
    """A bus ID in sysfs spelling: NVML's `00000000:3B:00.0` -> `0000:3b:00.0`."""
    text = text.strip().lower()
    parts = text.split(":")
    if len(parts) == 2:
        parts.insert(0, "0")
    if len(parts) != 3:
        return text
    try:
        domain = int(parts[0], 16)
    except ValueError:
        return text
    return f"{domain:04x}:{parts[1]}:{parts[2]}"


def _read(path: str) -> str:
    try:
        with open(path) as file:
            return file.read().strip()
    except OSError:
        return ""


def _hex(text: str) -> str:
    return text.lower().removeprefix("0x")


def _root_of(device_dir: str) -> str:
    """The `pciDDDD:BB` component of the device's real path, as `DDDD:BB`."""
    for part in os.path.realpath(device_dir).split(os.sep):
        if part.startswith("pci") and ":" in part:
            return part.removeprefix("pci")
    return ""


def udev_model_names() -> dict[str, str]:
    """PCI address -> marketing name from udev's hardware database ({} without pyudev or udev)."""
    try:
        import pyudev
    except ImportError:
        return {}
    names: dict[str, str] = {}
    try:
        for device in pyudev.Context().list_devices(subsystem="pci"):
            model = str(device.properties.get("ID_MODEL_FROM_DATABASE", ""))
            if model:
                names[str(device.sys_name)] = model
    except Exception as exc:  # pyudev surfaces libudev failures as assorted errors
        log.debug("udev hardware database unavailable: %s", exc)
    return names


class BusNames:
    """Product names per PCI address, read from ``source`` once per set of addresses on the bus: a
    detection on the same bus reuses them; a card added, removed or moved reads them again."""

    def __init__(self, source: ModelNames) -> None:
        self._source = source
        self._addresses: tuple[str, ...] | None = None
        self._names: Mapping[str, str] = {}

    def __call__(self, addresses: Sequence[str]) -> Mapping[str, str]:
        key = tuple(addresses)
        if key != self._addresses:
            self._names = self._source()
            self._addresses = key
        return self._names


def default_names(root: Path) -> ModelNames:
    """udev's hardware database for the real bus; no names for any other tree (a test's, a bench's)."""
    return udev_model_names if root == SYSFS else dict


def scan(root: Path = SYSFS, names: BusNames | None = None) -> list[PciDevice]:
    """Every PCI function under ``root`` (sorted by address); [] when the bus is not visible. ``names``
    (default: read once for this scan) gives the product names. Plain ``os`` calls on strings, not
    pathlib: pathlib interns every path component it parses, and interning and freeing them on every
    monitor period grew the interpreter's table of interned strings (one 0.9 MB resize, measured)."""
    devices_dir = os.path.join(root, "bus", "pci", "devices")
    try:
        addresses = sorted(os.listdir(devices_dir))
    except OSError:
        return []
    names_of = (names or BusNames(default_names(root)))(addresses)
    found = []
    for address in addresses:
        entry = os.path.join(devices_dir, address)
        numa = _read(os.path.join(entry, "numa_node"))
        found.append(
            PciDevice(
                address=address,
                vendor=_hex(_read(os.path.join(entry, "vendor"))),
                device=_hex(_read(os.path.join(entry, "device"))),
                pci_class=_hex(_read(os.path.join(entry, "class"))),
                numa_node="" if numa.startswith("-") else numa,
                cpu_affinity=_read(os.path.join(entry, "local_cpulist")),
                root=_root_of(entry),
                model=names_of.get(address, ""),
            )
        )
    return found


def _product(device: PciDevice) -> str:
    """`GH100 [H100 SXM5 80GB]` -> `H100 SXM5 80GB`; without a name, `PCI <vendor>:<device>`."""
    model = device.model
    if "[" in model and model.endswith("]"):
        return model[model.index("[") + 1 : -1]
    return model or f"PCI {device.pci_id}"


def with_topology(card: Card, device: PciDevice | None) -> Card:
    """``card`` with the bus facts a library does not give (NUMA, CPUs, class, host bridge)."""
    if device is None:
        return card
    return replace(
        card,
        pci_bus_id=device.address,
        pci_class=card.pci_class or device.pci_class,
        pci_root=card.pci_root or device.root,
        pci_id=card.pci_id or device.pci_id,
        numa_affinity=card.numa_affinity or device.numa_node,
        cpu_affinity=card.cpu_affinity or device.cpu_affinity,
    )


def bus_name(bus_id: str) -> str:
    """The ID PCI facts give a card at ``bus_id``; a card whose library gives no UUID is named so too."""
    return "pci-" + bus_id.replace(":", "-")


def pci_card(manufacturer: str, device: PciDevice, index: int, reason: str, healthy: bool = True) -> Card:
    """A card known only from the bus: no VRAM, versions or UUID, not sliceable; ``reason`` says why."""
    return Card(
        manufacturer=manufacturer,
        product=_product(device),
        memory_mib=0,
        uuid=bus_name(device.address),
        index=index,
        pci_bus_id=device.address,
        pci_class=device.pci_class,
        pci_root=device.root,
        pci_id=device.pci_id,
        numa_affinity=device.numa_node,
        cpu_affinity=device.cpu_affinity,
        healthy=healthy,
        sliceable=False,
        detail_missing=reason,
    )
