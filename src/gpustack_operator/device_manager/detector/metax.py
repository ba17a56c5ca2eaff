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
from gpustack_operator.device_manager.detector.indexed import MAX_MEMORY_MIB, Checks, IndexedDetector
from gpustack_operator.device_manager.detector.native import brief_version
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


class MetaxReader:
    """Each MetaX card as MXSML describes it (a ``CardReader``)."""

    def __init__(self, mxsml: Mxsml, sysfs: Path = SYSFS) -> None:
        self._mxsml = mxsml
        self._sysfs = sysfs
        self._checks = Checks(MANUFACTURER, LIBRARY)
        self._runtime = brief_version(self._checks.attempt(mxsml.maca_version, default=""))

    def count(self) -> int:
        return self._mxsml.count()

    def card(self, index: int) -> Card:
        mxsml, checks = self._mxsml, self._checks
        info = mxsml.info(index)
        bus_id = normalize_bus_id(info.bus_id)
        memory = checks.attempt(mxsml.memory, index, default=None)
        return Card(
            manufacturer=MANUFACTURER,
            product=info.name,
            memory_mib=checks.plausible(memory.total_mib if memory else 0, MAX_MEMORY_MIB, "VRAM MiB", index),
            uuid=info.uuid or bus_name(bus_id),
            index=index,
            minor=drm_card_minor(bus_id, self._sysfs),
            pci_bus_id=bus_id,
            driver_version=checks.attempt(mxsml.driver_version, index, default=""),
            runtime_version=self._runtime,
            healthy=checks.healthy(mxsml.ecc_ok, index),
        )

    def metrics(self, index: int) -> Metrics:
        mxsml, checks = self._mxsml, self._checks
        info = mxsml.info(index)
        memory = checks.attempt(mxsml.memory, index, default=None)
        return Metrics(
            manufacturer=MANUFACTURER,
            uuid=info.uuid or bus_name(normalize_bus_id(info.bus_id)),
            index=index,
            healthy=checks.healthy(mxsml.ecc_ok, index),
            memory_total_mib=memory.total_mib if memory else -1,
            memory_used_mib=memory.used_mib if memory else -1,
            utilization_percent=checks.attempt(mxsml.xcore_utilization, index, default=-1),
            temperature_c=checks.attempt(mxsml.temperature, index, default=-1),
        )


def detector(open_library: Callable[[], Mxsml] = _open_mxsml, sysfs: Path = SYSFS) -> IndexedDetector:
    """The metax detector: MXSML, loaded when the bus first shows a MetaX card."""
    return IndexedDetector(MANUFACTURER, LIBRARY, lambda: MetaxReader(open_library(), sysfs))
