"""NVIDIA cards through NVML (`libnvidia-ml.so.1`, our binding ``nvml``), with the original's corrections.

NVML reports what the driver sees, which is not quite what an admin buys or a scheduler needs: a GDDR
card with ECC on hides 1/16 of its VRAM for parity (we restore it, so an L40S reads 48 GiB like the
label on the box, while HBM cards keep ECC out of band and are left alone), the CUDA version comes as an
integer (12040 -> "12.4"), and the product family is not reported at all (it follows from the compute
capability). A card with volatile uncorrected DRAM ECC errors is unhealthy; a MIG-enabled card is
hard-partitioned and so not soft-sliceable.

NVML is read as every library over our own bindings is (``native.BindingDetector``): opened on the first
detection that finds NVIDIA cards and kept open; a library that will not load or initialise sends the
node to PCI facts with NVML's reason; a card NVML cannot identify (name, UUID, bus address) is left out
with a warning and the bus reports it unhealthy; a health query that fails for another reason than "not
supported" marks the card unhealthy with a warning.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Final

from gpustack_operator.device_manager.detector.native import BindingDetector, NodeFacts
from gpustack_operator.device_manager.model import Card

if TYPE_CHECKING:
    from collections.abc import Callable

    from gpustack_operator.device_manager.detector.nvml import Nvml

MANUFACTURER: Final = "nvidia"
LIBRARY: Final = "NVML"
HBM_BUS_WIDTH_BITS: Final = 1024
"""HBM stacks are at least 1024 bits wide (A30 3072, A100/H100 5120); GDDR tops out at 384 bits."""

_FAMILIES: Final = {1: "Tesla", 2: "Fermi", 3: "Kepler", 5: "Maxwell", 6: "Pascal", 9: "Hopper"}
_FAMILIES_BY_MINOR: Final = {7: (5, "Volta", "Turing"), 8: (9, "Ampere", "Ada-Lovelace")}


def family_of(major: int, minor: int) -> str:
    """The architecture of a compute capability (7.0 Volta, 7.5 Turing, 8.9 Ada-Lovelace, 10.0 Blackwell)."""
    if major in _FAMILIES_BY_MINOR:
        threshold, below, above = _FAMILIES_BY_MINOR[major]
        return below if minor < threshold else above
    if major in (10, 12):
        return "Blackwell"
    return _FAMILIES.get(major, "")


def runtime_version(cuda_driver_version: int) -> str:
    """NVML's CUDA driver version integer as `major.minor` (12040 -> "12.4"); "" when unknown."""
    if cuda_driver_version <= 0:
        return ""
    return f"{cuda_driver_version // 1000}.{cuda_driver_version % 1000 // 10}"


def corrected_memory_mib(mib: int, bus_width_bits: int, ecc_enabled: bool) -> int:
    """VRAM in MiB as NVML reports it, with the ECC share a GDDR card hides given back (x16/15)."""
    if 0 < bus_width_bits < HBM_BUS_WIDTH_BITS and ecc_enabled:
        return mib * 16 // 15
    return mib


def _open_nvml() -> Nvml:
    from gpustack_operator.device_manager.detector.nvml import Nvml

    return Nvml.open()


class NvidiaDetector(BindingDetector["Nvml"]):
    """NVML's cards with NVIDIA's corrections: GDDR + ECC VRAM, family, MIG, minor number."""

    manufacturer = MANUFACTURER
    label = LIBRARY

    def minor(self, lib: Nvml, index: int) -> int:
        return lib.minor(index)

    def compute_capability(self, lib: Nvml, index: int) -> str:
        capability = lib.compute_capability(index)
        return "" if capability.startswith("0.") else capability

    def read_card(self, lib: Nvml, device: int, node: NodeFacts) -> Card:
        card = super().read_card(lib, device, node)
        width = self.attempt(lib.bus_width, device, default=0)
        ecc = self.attempt(lib.ecc_enabled, device, default=False)
        major, _, minor = card.compute_capability.partition(".")
        return replace(
            card,
            memory_mib=corrected_memory_mib(card.memory_mib, width, ecc),
            family=family_of(int(major), int(minor)) if major else "",
            sliceable=not self.attempt(lib.mig_enabled, device, default=False),
        )


def detector(open_library: Callable[[], Nvml] = _open_nvml) -> NvidiaDetector:
    """The nvidia detector: NVML, loaded when the bus first shows an NVIDIA card."""
    return NvidiaDetector(open_library)
