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

from gpustack_operator.device_manager.detector.native import BindingDetector

if TYPE_CHECKING:
    from collections.abc import Callable

    from gpustack_operator.device_manager.detector.ixml import Ixml

MANUFACTURER: Final = "iluvatar"
LIBRARY: Final = "IXML"


def _open_ixml() -> Ixml:
    from gpustack_operator.device_manager.detector.ixml import Ixml

    return Ixml.open()


class IluvatarDetector(BindingDetector["Ixml"]):
    manufacturer = MANUFACTURER
    label = LIBRARY

    def minor(self, lib: Ixml, index: int) -> int:
        return lib.minor(index)

    def compute_capability(self, lib: Ixml, index: int) -> str:
        return lib.compute_capability(index)


def detector(open_library: Callable[[], Ixml] = _open_ixml) -> IluvatarDetector:
    """The iluvatar detector: IXML, loaded when the bus first shows an Iluvatar card."""
    return IluvatarDetector(open_library)
