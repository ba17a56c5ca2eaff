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

from gpustack_operator.device_manager.detector.indexed import BindingReader, Checks, IndexedDetector
from gpustack_operator.device_manager.detector.nvidia import runtime_version

if TYPE_CHECKING:
    from collections.abc import Callable

    from gpustack_operator.device_manager.detector.ixml import Ixml

MANUFACTURER: Final = "iluvatar"
LIBRARY: Final = "IXML"


def _open_ixml() -> Ixml:
    from gpustack_operator.device_manager.detector.ixml import Ixml

    return Ixml.open()


def _reader(ixml: Ixml) -> BindingReader:
    checks = Checks(MANUFACTURER, LIBRARY)
    return BindingReader(
        checks,
        ixml,
        ixml.health_ok,
        driver=checks.attempt(ixml.driver_version, default=""),
        runtime=runtime_version(checks.attempt(ixml.runtime_driver_version, default=0)),
        minor=ixml.minor,
        compute_capability=ixml.compute_capability,
    )


def detector(open_library: Callable[[], Ixml] = _open_ixml) -> IndexedDetector:
    """The iluvatar detector: IXML, loaded when the bus first shows an Iluvatar card."""
    return IndexedDetector(MANUFACTURER, LIBRARY, lambda: _reader(open_library()))
