"""Iluvatar CoreX GPUs through IXML (`libixml.so` from the CoreX SDK, through our binding ``ixml``).

Without IXML an Iluvatar node reports VRAM 0 and a broken card stays healthy. IXML, NVML-shaped, gives per
card: the name (`Iluvatar BI-V100`, the product the group ID comes from), VRAM in MiB, GPU cores, the
CUDA compute capability CoreX implements, the UUID, the IXML index (our index, and the number
IX_VISIBLE_DEVICES uses), the minor number (`/dev/iluvatarN`, our device-node number) and the PCI
address; per node the driver version and the CUDA version CoreX implements (our runtime version,
major.minor, as for NVIDIA).

A card is unhealthy when IXML's health query reports any fault (SYSHUB, memory controller, ECC, memory,
PCIe) or when the query fails (a card the library can no longer read); a driver without the query leaves
it healthy. Iluvatar cards are not sliceable (the manufacturer table gives them no logical slices).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from gpustack_operator.device_manager.detector.indexed import (
    MAX_CORES,
    MAX_MEMORY_MIB,
    Checks,
    IndexedDetector,
    bus_name,
)
from gpustack_operator.device_manager.detector.nvidia import runtime_version
from gpustack_operator.device_manager.detector.pci import normalize_bus_id
from gpustack_operator.device_manager.model import Card, Metrics

if TYPE_CHECKING:
    from collections.abc import Callable

    from gpustack_operator.device_manager.detector.ixml import Ixml

MANUFACTURER: Final = "iluvatar"
LIBRARY: Final = "IXML"


def _open_ixml() -> Ixml:
    from gpustack_operator.device_manager.detector.ixml import Ixml

    return Ixml.open()


class IluvatarReader:
    """Each Iluvatar card as IXML describes it (a ``CardReader``)."""

    def __init__(self, ixml: Ixml) -> None:
        self._ixml = ixml
        self._checks = Checks(MANUFACTURER, LIBRARY)
        self._driver = self._checks.attempt(ixml.driver_version, default="")
        self._runtime = runtime_version(self._checks.attempt(ixml.cuda_driver_version, default=0))

    def count(self) -> int:
        return self._ixml.count()

    def _uuid(self, index: int) -> str:
        """The UUID; a card that gives none is named by its bus address, as PCI facts name it."""
        return self._ixml.uuid(index) or bus_name(normalize_bus_id(self._ixml.bus_id(index)))

    def card(self, index: int) -> Card:
        ixml, checks = self._ixml, self._checks
        memory = checks.attempt(ixml.memory, index, default=None)
        return Card(
            manufacturer=MANUFACTURER,
            product=ixml.name(index),
            memory_mib=checks.plausible(memory.total_mib if memory else 0, MAX_MEMORY_MIB, "VRAM MiB", index),
            uuid=self._uuid(index),
            index=index,
            minor=checks.attempt(ixml.minor, index, default=-1),
            pci_bus_id=normalize_bus_id(ixml.bus_id(index)),
            cores=checks.plausible(checks.attempt(ixml.cores, index, default=0), MAX_CORES, "cores", index),
            driver_version=self._driver,
            runtime_version=self._runtime,
            compute_capability=checks.attempt(ixml.compute_capability, index, default=""),
            healthy=checks.healthy(ixml.health_ok, index),
        )

    def metrics(self, index: int) -> Metrics:
        ixml, checks = self._ixml, self._checks
        memory = checks.attempt(ixml.memory, index, default=None)
        return Metrics(
            manufacturer=MANUFACTURER,
            uuid=self._uuid(index),
            index=index,
            healthy=checks.healthy(ixml.health_ok, index),
            memory_total_mib=memory.total_mib if memory else -1,
            memory_used_mib=memory.used_mib if memory else -1,
            utilization_percent=checks.attempt(ixml.utilization, index, default=-1),
            temperature_c=checks.attempt(ixml.temperature, index, default=-1),
        )


def detector(open_library: Callable[[], Ixml] = _open_ixml) -> IndexedDetector:
    """The iluvatar detector: IXML, loaded when the bus first shows an Iluvatar card."""
    return IndexedDetector(MANUFACTURER, LIBRARY, lambda: IluvatarReader(open_library()))
