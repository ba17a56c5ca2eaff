"""Hygon DCUs: PCI facts only, because the DTK's DMI library (libhydmi.so) has no Python binding to call.

Hygon publishes no Python package for it, and our ctypes binding (see ``clib`` and ``dcmi`` for Ascend's) is
not written yet. So a node's hygon cards are reported from the PCI bus (count, bus address, NUMA node, local
CPUs, the hardware database's name), with `detail_missing` saying so; VRAM, versions and health stay unknown
and the cards are not sliceable.
"""

from __future__ import annotations

from typing import Final

from gpustack_operator.device_manager.detector.vendor import PciOnly

MANUFACTURER: Final = "hygon"
LIBRARY: Final = "the DTK's DMI library"


def detector() -> PciOnly:
    """The hygon detector: always falls back to PCI facts."""
    return PciOnly(MANUFACTURER, LIBRARY)
