"""Huawei Ascend NPUs: PCI facts only, because DCMI (libdcmi.so from the Ascend driver) has no Python binding
to call.

CANN's pyACL needs a device context per NPU and reports neither health nor the board's product name, and
this operator loads no vendor library through hand-written ctypes. So a node's ascend cards are reported
from the PCI bus (count, bus address, NUMA node, local CPUs, the hardware database's name), with
`detail_missing` saying so; VRAM, versions and health stay unknown and the cards are not sliceable.
"""

from __future__ import annotations

from typing import Final

from gpustack_operator.device_manager.detector.vendor import PciOnly

MANUFACTURER: Final = "ascend"
LIBRARY: Final = "DCMI"


def detector() -> PciOnly:
    """The ascend detector: always falls back to PCI facts."""
    return PciOnly(MANUFACTURER, LIBRARY)
