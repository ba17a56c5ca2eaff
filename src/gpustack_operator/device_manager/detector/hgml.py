"""Our binding of T-Head's HGML (`libhgml.so`, shipped with the PPU SDK): the calls detection needs.

HGML is NVML's C API renamed: `hgmlInitWithFlags`, `hgmlDeviceGetCount_v2`, `hgmlDeviceGetName`, ... with
NVML's prototypes, structure layouts and error codes, and HGGC (T-Head's CUDA-compatible runtime) where
NVML says CUDA (`hgmlSystemGetHggcDriverVersion`, `hgmlDeviceGetHggcComputeCapability`). Those facts are
from the public bindings of `hgml.h` (gpustack-runtime's pyhgml, a Go binding of the same header); no
T-Head document or real libhgml.so was available to check them against. The code is ours, through
``nvmlshape``. This module adds the health query, NVML's memory error counter: volatile uncorrected
errors in device memory (DRAM), else the volatile uncorrected total. HGML's `hgmlShutdown` is not
called: like every vendor library here, it stays open for the process. Imported only when the bus shows
a T-Head card (``clib``).
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Mapping
from ctypes import POINTER, c_int, c_uint, c_ulonglong
from typing import Final

from gpustack_operator.device_manager.detector.nvmlshape import HANDLE, UNSUPPORTED, Api, NvmlShaped

PPU_HOME: Final = "/usr/local/PPU_SDK"


def library_paths(environ: Mapping[str, str] = os.environ) -> tuple[str, ...]:
    """The linker's search path, then the PPU SDK's lib directory (under `$PPU_HOME`)."""
    return ("libhgml.so", f"{environ.get('PPU_HOME') or PPU_HOME}/lib/libhgml.so")


ERROR_DRIVER_NOT_LOADED: Final = 9
ERROR_GPU_IS_LOST: Final = 15
MEMORY_ERROR_UNCORRECTED: Final = 1
VOLATILE_ECC: Final = 0
LOCATION_DRAM: Final = 2
"""`hgmlMemoryLocation_t` of device memory."""

API: Final = Api("hgml", "hgmlSystemGetHggcDriverVersion", "hgmlDeviceGetHggcComputeCapability")
PROTOTYPES: Final = {
    **API.prototypes(),
    "hgmlDeviceGetMemoryErrorCounter": (c_int, (HANDLE, c_uint, c_uint, c_uint, POINTER(c_ulonglong))),
    "hgmlDeviceGetTotalEccErrors": (c_int, (HANDLE, c_uint, c_uint, POINTER(c_ulonglong))),
}


class Hgml(NvmlShaped):
    """HGML's answers as Python values, per card index; every failure is ``clib.CallError``."""

    API = API
    PROTOTYPES = PROTOTYPES
    LABEL = "T-Head HGML (libhgml.so)"

    @classmethod
    def library_paths(cls) -> tuple[str, ...]:
        return library_paths()

    def health(self, index: int) -> bool | None:
        """False when device memory reports volatile uncorrected errors (the DRAM counter, else the
        total); None when this driver or card counts none."""
        device, errors = self._device(index), c_ulonglong()
        for name, *where in (
            ("hgmlDeviceGetMemoryErrorCounter", VOLATILE_ECC, LOCATION_DRAM),
            ("hgmlDeviceGetTotalEccErrors", VOLATILE_ECC),
        ):
            if self._lib.offered(
                UNSUPPORTED, name, device, MEMORY_ERROR_UNCORRECTED, *where, ctypes.byref(errors)
            ):
                return errors.value == 0
        return None
