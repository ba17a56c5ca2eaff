"""Our binding of Iluvatar's IXML (`libixml.so`, shipped with the CoreX SDK): the calls detection needs.

IXML is NVML's C API under Iluvatar's library name, plus a few `ixml*` calls of its own (the health
query). Iluvatar publishes no Python package for it, and importing nvidia-ml-py against it would bind the
NVIDIA names to the wrong library, so the NVML-shaped calls are read through ``nvmlshape`` (with NVML's
own names) and this module adds the health query as `ixml.h` gives it (gpustack-runtime's pyixml
records the same facts); the code is ours. Imported only when the bus shows an Iluvatar card (``clib``).
"""

from __future__ import annotations

import ctypes
import os
from ctypes import POINTER, c_int, c_longlong
from pathlib import Path
from typing import Final

from gpustack_operator.device_manager.detector.nvmlshape import (
    ERROR_NOT_SUPPORTED,
    HANDLE,
    MEMORY_V2,
    UNSUPPORTED,
    Api,
    NvmlShaped,
)

__all__ = ["ERROR_NOT_SUPPORTED", "MEMORY_V2", "PROTOTYPES", "Ixml", "library_paths"]

COREX_HOME: Final = "/usr/local/corex"


def library_paths(corex_home: str | None = None) -> tuple[str, ...]:
    """The linker's search path, then the CoreX SDK's lib64 and lib (under `$COREX_HOME`)."""
    home = Path(corex_home or os.environ.get("COREX_HOME", "") or COREX_HOME)
    return ("libixml.so", str(home / "lib64/libixml.so"), str(home / "lib/libixml.so"))


HEALTH_OK: Final = 0
"""`ixmlDeviceGetHealth` answers a bit set of faults: SYSHUB 0x1, MC 0x2, ECC 0x10, memory 0x20, PCIe 0x40."""

API: Final = Api("nvml", "nvmlSystemGetCudaDriverVersion", "nvmlDeviceGetCudaComputeCapability")
PROTOTYPES: Final = {**API.prototypes(), "ixmlDeviceGetHealth": (c_int, (HANDLE, POINTER(c_longlong)))}


class Ixml(NvmlShaped):
    """IXML's answers as Python values, per card index; every failure is ``clib.CallError``."""

    API = API
    PROTOTYPES = PROTOTYPES
    LABEL = "Iluvatar IXML (libixml.so)"

    @classmethod
    def library_paths(cls) -> tuple[str, ...]:
        return library_paths()

    def health(self, index: int) -> bool | None:
        """False when IXML reports any fault bit; None when this driver has no health query."""
        faults = c_longlong()
        if not self._lib.offered(
            UNSUPPORTED, "ixmlDeviceGetHealth", self._device(index), ctypes.byref(faults)
        ):
            return None
        return faults.value == HEALTH_OK
