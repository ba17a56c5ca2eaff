"""Our binding of NVIDIA's NVML (`libnvidia-ml.so.1`, installed with the driver): the calls detection needs.

NVML is the API ``nvmlshape`` is shaped after, so NVIDIA's cards are read through the same binding as
Iluvatar's IXML and T-Head's HGML, with NVML's own names, plus the calls only NVIDIA's detection makes:
ECC mode and memory bus width (the VRAM correction of a GDDR card), MIG mode (a MIG-enabled card is not
soft-sliceable) and the ECC error counters (health). Prototypes, structure layouts, constants and error
codes are those of `nvml.h`, as nvidia-ml-py (NVIDIA's own Python binding, which this replaces: its one
8,000-line module costs the device manager 2 MB resident) declares them. The library is loaded by its
soname, as nvidia-ml-py loads it (the container toolkit mounts it into the Pod). Imported only when the
bus shows an NVIDIA card (``nvidia``).
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, c_int, c_uint, c_ulonglong
from typing import Final

from gpustack_operator.device_manager.detector import clib
from gpustack_operator.device_manager.detector.nvmlshape import (
    HANDLE,
    MIB,
    UNSUPPORTED,
    Api,
    Memory,
    MemoryUse,
    NvmlShaped,
)
from gpustack_operator.device_manager.detector.vendor import LibraryUnavailableError

SONAME: Final = "libnvidia-ml.so.1"

FEATURE_ENABLED: Final = 1
"""`NVML_FEATURE_ENABLED` (ECC mode)."""
DEVICE_MIG_ENABLE: Final = 1
MEMORY_ERROR_UNCORRECTED: Final = 1
VOLATILE_ECC: Final = 0
LOCATION_DRAM: Final = 2
"""`NVML_MEMORY_LOCATION_DRAM`: device memory (GDDR or HBM)."""

ERRORS: Final = {
    1: "uninitialized",
    2: "invalid argument",
    3: "not supported",
    4: "no permission",
    6: "not found",
    9: "driver not loaded",
    10: "timeout",
    12: "library not found",
    13: "function not found",
    14: "corrupted infoROM",
    15: "GPU is lost",
    17: "operating system call failed",
    18: "library and driver versions differ",
    999: "unknown error",
}
"""`nvmlReturn_t` codes in words, for the reason a node falls back to PCI facts."""

API: Final = Api("nvml", "nvmlSystemGetCudaDriverVersion", "nvmlDeviceGetCudaComputeCapability")
PROTOTYPES: Final = {
    **API.prototypes(),
    "nvmlDeviceGetEccMode": (c_int, (HANDLE, POINTER(c_int), POINTER(c_int))),
    "nvmlDeviceGetMemoryBusWidth": (c_int, (HANDLE, POINTER(c_uint))),
    "nvmlDeviceGetMigMode": (c_int, (HANDLE, POINTER(c_uint), POINTER(c_uint))),
    "nvmlDeviceGetMemoryErrorCounter": (c_int, (HANDLE, c_int, c_int, c_int, POINTER(c_ulonglong))),
    "nvmlDeviceGetTotalEccErrors": (c_int, (HANDLE, c_int, c_int, POINTER(c_ulonglong))),
}


def reason(code: int | None) -> str:
    """NVML's code in words (`driver not loaded (9)`)."""
    return f"{ERRORS.get(code, 'error')} ({code})" if code is not None else "not exported"


class Nvml(NvmlShaped):
    """NVML's answers as Python values, per card index; every failure is ``clib.CallError``."""

    API = API
    PROTOTYPES = PROTOTYPES
    LABEL = f"NVIDIA NVML ({SONAME})"

    @classmethod
    def library_paths(cls) -> tuple[str, ...]:
        return (SONAME,)

    def init(self) -> None:
        """`nvmlInitWithFlags(0)`; LibraryUnavailableError naming NVML's reason when it refuses."""
        try:
            super().init()
        except clib.CallError as exc:
            raise LibraryUnavailableError(f"{self.LABEL} cannot be initialised: {reason(exc.code)}") from exc

    def memory(self, index: int) -> MemoryUse:
        """The v1 structure, as nvidia-ml-py reads it by default (its `used` includes what the driver
        reserves; v2's leaves that out)."""
        v1 = Memory()
        self._by_device("DeviceGetMemoryInfo", index, ctypes.byref(v1))
        return MemoryUse(int(v1.total) // MIB, int(v1.used) // MIB)

    def _pair(self, name: str, index: int, kind: type[c_int] | type[c_uint]) -> int:
        """The current value of a (current, pending) pair."""
        current, pending = kind(), kind()
        self._lib.call(name, self._device(index), ctypes.byref(current), ctypes.byref(pending))
        return int(current.value)

    def ecc_enabled(self, index: int) -> bool:
        return self._pair("nvmlDeviceGetEccMode", index, c_int) == FEATURE_ENABLED

    def mig_enabled(self, index: int) -> bool:
        return self._pair("nvmlDeviceGetMigMode", index, c_uint) == DEVICE_MIG_ENABLE

    def bus_width(self, index: int) -> int:
        """The memory bus width in bits."""
        return self._lib.uint("nvmlDeviceGetMemoryBusWidth", self._device(index))

    def health(self, index: int) -> bool | None:
        """False when device memory counts volatile uncorrected ECC errors: the DRAM counter, else (older
        GPUs, any failure of that counter) the volatile uncorrected total; None when neither is offered
        (ECC off, or a card without it)."""
        device, errors = self._device(index), c_ulonglong()
        try:
            self._lib.call(
                "nvmlDeviceGetMemoryErrorCounter",
                device,
                MEMORY_ERROR_UNCORRECTED,
                VOLATILE_ECC,
                LOCATION_DRAM,
                ctypes.byref(errors),
            )
        except clib.CallError:
            if not self._lib.offered(
                UNSUPPORTED,
                "nvmlDeviceGetTotalEccErrors",
                device,
                MEMORY_ERROR_UNCORRECTED,
                VOLATILE_ECC,
                ctypes.byref(errors),
            ):
                return None
        return errors.value == 0
