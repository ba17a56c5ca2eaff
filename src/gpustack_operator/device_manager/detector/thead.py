"""T-Head PPUs: PCI facts only, because hgml (libhgml.so from the PPU SDK) has no Python binding to call.

T-Head publishes no Python package for hgml, and our ctypes binding (see ``clib`` and ``dcmi`` for Ascend's)
is not written yet. So a node's thead cards are reported from the PCI bus (count, bus address, NUMA node,
local CPUs, the hardware database's name), with `detail_missing` saying so; VRAM, versions and health stay
unknown and the cards are not sliceable.
"""

from __future__ import annotations

from typing import Final

from gpustack_operator.device_manager.detector.vendor import PciOnly

MANUFACTURER: Final = "thead"
LIBRARY: Final = "hgml"


def detector() -> PciOnly:
    """The thead detector: always falls back to PCI facts."""
    return PciOnly(MANUFACTURER, LIBRARY)
