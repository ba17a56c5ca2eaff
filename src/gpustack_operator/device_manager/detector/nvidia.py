"""NVIDIA cards through NVML (the `pynvml` module of nvidia-ml-py), with the original's corrections.

NVML reports what the driver sees, which is not quite what an admin buys or a scheduler needs: a GDDR
card with ECC on hides 1/16 of its VRAM for parity (we restore it, so an L40S reads 48 GiB like the
label on the box, while HBM cards keep ECC out of band and are left alone), the CUDA version comes as an
integer (12040 -> "12.4"), and the product family is not reported at all (it follows from the compute
capability). A card with volatile uncorrected DRAM ECC errors is unhealthy; a MIG-enabled card is
hard-partitioned and so not soft-sliceable.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, Final, TypeVar

from gpustack_operator.device_manager.detector.library import VendorLibrary
from gpustack_operator.device_manager.detector.pci import PciDevice, normalize_bus_id, with_topology
from gpustack_operator.device_manager.model import Card, Metrics

log = logging.getLogger(__name__)

MANUFACTURER: Final = "nvidia"
HBM_BUS_WIDTH_BITS: Final = 1024
"""HBM stacks are at least 1024 bits wide (A30 3072, A100/H100 5120); GDDR tops out at 384 bits."""

T = TypeVar("T")

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


def corrected_memory_mib(total_bytes: int, bus_width_bits: int, ecc_enabled: bool) -> int:
    """VRAM in MiB, with the ECC share a GDDR card hides given back (x16/15)."""
    mib = total_bytes >> 20
    if 0 < bus_width_bits < HBM_BUS_WIDTH_BITS and ecc_enabled:
        return mib * 16 // 15
    return mib


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class NvmlDetector:
    """Reads every NVIDIA card through NVML; NVML is initialised once and kept open."""

    manufacturer = MANUFACTURER

    def __init__(self, nvml: ModuleType | None = None) -> None:
        self._lib = VendorLibrary(
            "pynvml",
            init="nvmlInit",
            shutdown="nvmlShutdown",
            error="NVMLError",
            label="nvidia-ml-py (pynvml) / NVML",
            module=nvml,
        )

    def _library(self) -> Any:
        return self._lib.get()

    def close(self) -> None:
        self._lib.close()

    def _try(self, call: Callable[..., T], *args: Any, default: T) -> T:
        """``call(*args)``, or ``default`` when NVML says the query is unsupported or failed."""
        return self._lib.attempt(call, *args, default=default)

    def _healthy(self, nvml: Any, handle: Any) -> bool:
        """No volatile uncorrected DRAM ECC error (older GPUs: no volatile uncorrected ECC error at all)."""
        query = (handle, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC)
        errors = self._try(
            nvml.nvmlDeviceGetMemoryErrorCounter, *query, nvml.NVML_MEMORY_LOCATION_DRAM, default=None
        )
        if errors is None:
            errors = self._try(nvml.nvmlDeviceGetTotalEccErrors, *query, default=0)
        return int(errors) == 0

    def _card(self, nvml: Any, index: int, driver: str, runtime: str) -> Card:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        ecc = self._try(nvml.nvmlDeviceGetEccMode, handle, default=[0, 0])[0] == nvml.NVML_FEATURE_ENABLED
        width = self._try(nvml.nvmlDeviceGetMemoryBusWidth, handle, default=0)
        major, minor = self._try(nvml.nvmlDeviceGetCudaComputeCapability, handle, default=(0, 0))
        mig = self._try(nvml.nvmlDeviceGetMigMode, handle, default=[0, 0])[0]
        return Card(
            manufacturer=MANUFACTURER,
            product=_text(nvml.nvmlDeviceGetName(handle)),
            memory_mib=corrected_memory_mib(int(nvml.nvmlDeviceGetMemoryInfo(handle).total), width, ecc),
            uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
            index=index,
            minor=self._try(nvml.nvmlDeviceGetMinorNumber, handle, default=-1),
            pci_bus_id=normalize_bus_id(_text(nvml.nvmlDeviceGetPciInfo(handle).busId)),
            cores=self._try(nvml.nvmlDeviceGetNumGpuCores, handle, default=0),
            driver_version=driver,
            runtime_version=runtime,
            compute_capability=f"{major}.{minor}" if major else "",
            family=family_of(major, minor),
            healthy=self._healthy(nvml, handle),
            sliceable=mig != nvml.NVML_DEVICE_MIG_ENABLE,
        )

    def cards(self, pci: Sequence[PciDevice]) -> list[Card]:
        nvml = self._library()
        by_address = {device.address: device for device in pci}
        driver = _text(self._try(nvml.nvmlSystemGetDriverVersion, default=""))
        runtime = runtime_version(self._try(nvml.nvmlSystemGetCudaDriverVersion, default=0))
        cards = []
        for index in range(nvml.nvmlDeviceGetCount()):
            try:
                card = self._card(nvml, index, driver, runtime)
            except nvml.NVMLError as exc:
                log.warning("NVML cannot read nvidia card index=%s: %s", index, exc)
                continue
            cards.append(with_topology(card, by_address.get(card.pci_bus_id)))
        return cards

    def metrics(self) -> list[Metrics]:
        nvml = self._library()
        readings = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            utilization = self._try(nvml.nvmlDeviceGetUtilizationRates, handle, default=None)
            readings.append(
                Metrics(
                    manufacturer=MANUFACTURER,
                    uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                    index=index,
                    healthy=self._healthy(nvml, handle),
                    memory_total_mib=int(memory.total) >> 20,
                    memory_used_mib=int(memory.used) >> 20,
                    utilization_percent=-1 if utilization is None else int(utilization.gpu),
                    temperature_c=self._try(
                        nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU, default=-1
                    ),
                )
            )
        return readings
