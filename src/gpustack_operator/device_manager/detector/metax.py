"""MetaX GPUs through MXSML (`libmxsml.so` from the MetaX driver and MACA, through our binding ``mxsml``).

Without MXSML a MetaX node reports VRAM 0, so its `.sliced.*` capacities are zero and slicing is
unreachable, and a broken card stays healthy. MXSML gives per card: the name (`MXC500`, the product the
group ID comes from), VRAM in MiB, the UUID, the MXSML index (our index, and the number
METAX_VISIBLE_DEVICES uses), the PCI address and the driver version; per node the MACA version (our
runtime version, major.minor). The DRM card minor (`/dev/dri/cardN`, which the allocator mounts) is read
from sysfs, as for AMD. MXSML has no core count: cores read 0.

A card is unhealthy when its VRAM reports uncorrectable ECC errors or when its ECC query fails (a card the
library can no longer read); a driver that does not offer the query leaves it healthy. MetaX cards are
logically sliceable (16 slices, compute partitioned, from the manufacturer table).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final

from gpustack_operator.device_manager.detector.amd import drm_card_minor
from gpustack_operator.device_manager.detector.native import (
    MAX_MEMORY_MIB,
    IndexedDetector,
    NodeFacts,
    brief_version,
)
from gpustack_operator.device_manager.detector.pci import SYSFS, bus_name, normalize_bus_id
from gpustack_operator.device_manager.model import Card, Metrics

if TYPE_CHECKING:
    from collections.abc import Callable

    from gpustack_operator.device_manager.detector.mxsml import Mxsml

MANUFACTURER: Final = "metax"
LIBRARY: Final = "MXSML"


def _open_mxsml() -> Mxsml:
    from gpustack_operator.device_manager.detector.mxsml import Mxsml

    return Mxsml.open()


class MetaxDetector(IndexedDetector["Mxsml"]):
    """Each MetaX card as MXSML describes it; the library is loaded on first use and kept open."""

    manufacturer = MANUFACTURER
    label = LIBRARY

    def __init__(self, open_library: Callable[[], Mxsml] = _open_mxsml, sysfs: Path = SYSFS) -> None:
        super().__init__(open_library)
        self._sysfs = sysfs

    def where(self, device: int) -> str:
        return str(device)

    def node_facts(self, lib: Mxsml) -> NodeFacts:
        return NodeFacts(runtime_version=brief_version(self.attempt(lib.maca_version, default="")))

    def read_card(self, lib: Mxsml, device: int, node: NodeFacts) -> Card:
        info = lib.info(device)
        bus_id = normalize_bus_id(info.bus_id)
        memory = self.attempt(lib.memory, device, default=None)
        total = memory.total_mib if memory else 0
        return Card(
            manufacturer=MANUFACTURER,
            product=info.name,
            memory_mib=self.plausible(total, MAX_MEMORY_MIB, "VRAM MiB", self.where(device)),
            uuid=info.uuid or bus_name(bus_id),
            index=device,
            minor=drm_card_minor(bus_id, self._sysfs),
            pci_bus_id=bus_id,
            driver_version=self.attempt(lib.driver_version, device, default=""),
            runtime_version=node.runtime_version,
            healthy=self.checked_health(lambda: lib.ecc_ok(device), self.where(device)),
        )

    def read_metrics(self, lib: Mxsml, device: int) -> Metrics:
        info = lib.info(device)
        memory = self.attempt(lib.memory, device, default=None)
        return Metrics(
            manufacturer=MANUFACTURER,
            uuid=info.uuid or bus_name(normalize_bus_id(info.bus_id)),
            index=device,
            healthy=self.checked_health(lambda: lib.ecc_ok(device), self.where(device)),
            memory_total_mib=memory.total_mib if memory else -1,
            memory_used_mib=memory.used_mib if memory else -1,
            utilization_percent=self.attempt(lib.xcore_utilization, device, default=-1),
            temperature_c=self.attempt(lib.temperature, device, default=-1),
        )


def detector(open_library: Callable[[], Mxsml] = _open_mxsml, sysfs: Path = SYSFS) -> MetaxDetector:
    """The metax detector: MXSML, loaded when the bus first shows a MetaX card."""
    return MetaxDetector(open_library, sysfs)
