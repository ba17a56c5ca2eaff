"""The PCI bus as sysfs shows it: which accelerators are plugged in, whatever their vendor library says.

Every vendor library can be missing, too old or broken on a node; the bus cannot. Scanning
``/sys/bus/pci/devices`` for the manufacturers' vendor IDs and the accelerator class prefixes
(``GPUSTACK_PCI_CLASS_PREFIXES``) tells us a card is there, where it sits (NUMA node, local CPUs, host
bridge) and, from udev's database where udev runs and its database is visible, its marketing name.
Library detectors use it to fill in topology; when a library is unusable the card is still reported from
these facts.

The names are read once per set of PCI addresses (``BusNames``) and again only when the bus changes: a
name does not change while the card stays in its slot, and reading them through pyudev on every
detection grew the device manager's resident set by about 1.35 MB over the first thousand detections
(libudev's allocations). They are read from udev's database files directly (``udev_model_names``), as
libudev reads them: importing pyudev and opening a libudev context cost the device manager 0.4 MB for a
property that is one line of a text file.
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

UDEV_DATA = Path("/run/udev/data")
"""udev's database of the devices it has processed: one file per device, `+pci:<address>` for a PCI
function, one `E:KEY=value` line per property."""

ModelNames = Callable[[Sequence[str]], Mapping[str, str]]
"""Where product names come from: the bus's PCI addresses -> {address: name} (udev's database by default)."""


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


def udev_model_names(addresses: Sequence[str], data: Path = UDEV_DATA) -> dict[str, str]:
    """PCI address -> marketing name: the `ID_MODEL_FROM_DATABASE` property udev's hardware database gave
    the device when udev added it, from udev's database (``data``, what libudev and pyudev read); {} for
    a device udev has no record of, or where the database is not visible (a container without /run/udev)."""
    names: dict[str, str] = {}
    for address in addresses:
        try:
            with open(os.path.join(data, f"+pci:{address}"), encoding="utf-8", errors="replace") as record:
                for line in record:
                    if line.startswith("E:ID_MODEL_FROM_DATABASE="):
                        names[address] = line.partition("=")[2].strip()
                        break
        except OSError:
            continue
    return names


def no_names(addresses: Sequence[str]) -> dict[str, str]:
    return {}


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
            self._names = self._source(key)
            self._addresses = key
        return self._names


def default_names(root: Path) -> ModelNames:
    """udev's hardware database for the real bus; no names for any other tree (a test's, a bench's)."""
    return udev_model_names if root == SYSFS else no_names


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
