"""Iluvatar CoreX GPUs: PCI facts only, because ixml (libixml.so from CoreX) has no Python binding to call.

Iluvatar publishes no Python package for ixml, and our ctypes binding (see ``clib`` and ``dcmi`` for
Ascend's) is not written yet. So a node's iluvatar cards are reported from the PCI bus (count, bus address,
NUMA node, local CPUs, the hardware database's name), with `detail_missing` saying so; VRAM, versions and
health stay unknown and the cards are not sliceable.
"""

from __future__ import annotations

from typing import Final

from gpustack_operator.device_manager.detector.vendor import PciOnly

MANUFACTURER: Final = "iluvatar"
LIBRARY: Final = "ixml"


def detector() -> PciOnly:
    """The iluvatar detector: always falls back to PCI facts."""
    return PciOnly(MANUFACTURER, LIBRARY)
