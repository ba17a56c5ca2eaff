"""T-Head PPUs through HGML (`libhgml.so` from the PPU SDK, through our binding ``hgml``).

Without HGML a T-Head node reports VRAM 0 and a broken PPU stays healthy. HGML, NVML-shaped, gives per
card: the name (the product the group ID comes from), VRAM in MiB, cores, the HGGC compute capability,
the UUID, the HGML index (our index) and the PCI address; per node the driver version and the HGGC
version the driver implements (our runtime version, major.minor, read as NVML's CUDA integer). HGML's
minor number is not read: nothing public says the PPU's device node is named after it, so the
device-node number stays the index.

A PPU is unhealthy when device memory reports volatile uncorrected ECC errors or when the ECC query fails
(a card the library can no longer read); a driver that does not offer the query leaves it healthy. T-Head
cards are not sliceable (the manufacturer table gives them no logical slices).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from gpustack_operator.device_manager.detector.native import BindingDetector

if TYPE_CHECKING:
    from collections.abc import Callable

    from gpustack_operator.device_manager.detector.hgml import Hgml

MANUFACTURER: Final = "thead"
LIBRARY: Final = "HGML"


def _open_hgml() -> Hgml:
    from gpustack_operator.device_manager.detector.hgml import Hgml

    return Hgml.open()


class TheadDetector(BindingDetector["Hgml"]):
    manufacturer = MANUFACTURER
    label = LIBRARY

    def compute_capability(self, lib: Hgml, index: int) -> str:
        return lib.compute_capability(index)


def detector(open_library: Callable[[], Hgml] = _open_hgml) -> TheadDetector:
    """The thead detector: HGML, loaded when the bus first shows a T-Head card."""
    return TheadDetector(open_library)
