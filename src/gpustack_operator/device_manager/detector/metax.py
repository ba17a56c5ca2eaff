"""MetaX GPUs: PCI facts only, because mxsml (libmxsml.so from MACA) has no Python binding to call.

MetaX publishes no Python package for mxsml, and our ctypes binding (see ``clib`` and ``dcmi`` for Ascend's)
is not written yet. So a node's metax cards are reported from the PCI bus (count, bus address, NUMA node,
local CPUs, the hardware database's name), with `detail_missing` saying so; VRAM, versions and health stay
unknown and the cards are not sliceable.
"""

from __future__ import annotations

from typing import Final

from gpustack_operator.device_manager.detector.vendor import PciOnly

MANUFACTURER: Final = "metax"
LIBRARY: Final = "mxsml"


def detector() -> PciOnly:
    """The metax detector: always falls back to PCI facts."""
    return PciOnly(MANUFACTURER, LIBRARY)
