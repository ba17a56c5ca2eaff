"""Our binding of Moore Threads' MTML (`libmtml.so`, shipped with the MT GPU driver): what detection reads.

Moore Threads publishes a Python binding (mthreads-ml-py's `pymtml`), but it keeps library-wide state
and is one more package in a 60 MB process; the calls the detector needs are few, so this module
declares them with their prototypes, structure layouts and error codes as `mtml_api.h` gives them (and
pymtml records them); the code is ours. MTML hands out handles: the library's, then per card a device
handle, and per device a memory and a GPU handle, each freed after use. Imported only when the bus
shows a Moore Threads card (``clib``).
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Iterator
from ctypes import POINTER, Structure, c_char, c_float, c_int, c_uint, c_uint64, c_ulonglong, c_void_p
from dataclasses import dataclass
from typing import Any, Final

from gpustack_operator.device_manager.detector import clib

LIBRARY_PATHS: Final = ("libmtml.so.2", "libmtml.so")
"""The versioned runtime current MUSA installs ship, then the unversioned name older hosts have."""

DRIVER_VERSION_LENGTH: Final = 80
NAME_LENGTH: Final = 32
UUID_LENGTH: Final = 48
SBDF_LENGTH: Final = 32

ERROR_NOT_SUPPORTED: Final = 4
ERROR_FUNCTION_NOT_FOUND: Final = 667
UNSUPPORTED: Final = frozenset({ERROR_NOT_SUPPORTED, ERROR_FUNCTION_NOT_FOUND, None})
"""Answers that mean "this query does not exist here", not "this card is broken"."""
ERROR_UNCORRECTED: Final = 1
VOLATILE_ECC: Final = 0
LOCATION_DRAM: Final = 0x1


class PciInfo(Structure):
    _fields_ = (
        ("sbdf", c_char * SBDF_LENGTH),
        ("segment", c_uint),
        ("bus", c_uint),
        ("device", c_uint),
        ("pciDeviceId", c_uint),
        ("pciSubsystemId", c_uint),
        ("busWidth", c_uint),
        ("pciMaxSpeed", c_float),
        ("pciCurSpeed", c_float),
        ("pciMaxWidth", c_uint),
        ("pciCurWidth", c_uint),
        ("pciMaxGen", c_uint),
        ("pciCurGen", c_uint),
        ("rsvd", c_int * 6),
    )


_H = c_void_p
_OUT_H = POINTER(c_void_p)
_TEXT_OUT = (POINTER(c_char), c_uint)
PROTOTYPES: Final[dict[str, clib.Prototype]] = {
    "mtmlLibraryInit": (c_int, (_OUT_H,)),
    "mtmlLibraryInitSystem": (c_int, (_H, _OUT_H)),
    "mtmlLibraryFreeSystem": (c_int, (_H,)),
    "mtmlSystemGetDriverVersion": (c_int, (_H, *_TEXT_OUT)),
    "mtmlLibraryCountDevice": (c_int, (_H, POINTER(c_uint))),
    "mtmlLibraryInitDeviceByIndex": (c_int, (_H, c_uint, _OUT_H)),
    "mtmlLibraryFreeDevice": (c_int, (_H,)),
    "mtmlDeviceGetName": (c_int, (_H, *_TEXT_OUT)),
    "mtmlDeviceGetUUID": (c_int, (_H, *_TEXT_OUT)),
    "mtmlDeviceCountGpuCores": (c_int, (_H, POINTER(c_uint))),
    "mtmlDeviceGetPciInfo": (c_int, (_H, POINTER(PciInfo))),
    "mtmlDeviceInitMemory": (c_int, (_H, _OUT_H)),
    "mtmlDeviceFreeMemory": (c_int, (_H,)),
    "mtmlMemoryGetTotal": (c_int, (_H, POINTER(c_uint64))),
    "mtmlMemoryGetUsed": (c_int, (_H, POINTER(c_uint64))),
    "mtmlMemoryGetEccErrorCounter": (c_int, (_H, c_uint, c_uint, c_uint, POINTER(c_ulonglong))),
    "mtmlDeviceInitGpu": (c_int, (_H, _OUT_H)),
    "mtmlDeviceFreeGpu": (c_int, (_H,)),
    "mtmlGpuGetUtilization": (c_int, (_H, POINTER(c_uint))),
    "mtmlGpuGetTemperature": (c_int, (_H, POINTER(c_uint))),
}

MIB: Final = 1 << 20


@dataclass(frozen=True)
class Memory:
    total_mib: int
    used_mib: int


class Mtml(clib.Binding):
    """MTML's answers as Python values, per card index; every failure is ``clib.CallError``."""

    PROTOTYPES = PROTOTYPES
    LABEL = "Moore Threads MTML (libmtml.so)"

    def __init__(self, handle: Any) -> None:
        super().__init__(handle)
        self._library = c_void_p()

    @classmethod
    def library_paths(cls) -> tuple[str, ...]:
        return LIBRARY_PATHS

    def init(self) -> None:
        """MTML hands back the library handle every later call starts from."""
        self._lib.call("mtmlLibraryInit", ctypes.byref(self._library))

    @contextlib.contextmanager
    def _handle(self, init: str, free: str, *args: Any) -> Iterator[c_void_p]:
        """A handle from ``init(*args, &handle)``, freed with ``free`` after use (a failing free is ignored:
        the answer was read)."""
        handle = c_void_p()
        self._lib.call(init, *args, ctypes.byref(handle))
        try:
            yield handle
        finally:
            with contextlib.suppress(clib.CallError):
                self._lib.call(free, handle)

    def _device(self, index: int) -> contextlib.AbstractContextManager[c_void_p]:
        return self._handle("mtmlLibraryInitDeviceByIndex", "mtmlLibraryFreeDevice", self._library, index)

    def driver_version(self) -> str:
        with self._handle("mtmlLibraryInitSystem", "mtmlLibraryFreeSystem", self._library) as system:
            return self._lib.text("mtmlSystemGetDriverVersion", DRIVER_VERSION_LENGTH, system)

    def runtime_version(self) -> str:
        """MTML does not say the MUSA toolkit's version."""
        return ""

    def count(self) -> int:
        return self._lib.uint("mtmlLibraryCountDevice", self._library)

    def name(self, index: int) -> str:
        with self._device(index) as device:
            return self._lib.text("mtmlDeviceGetName", NAME_LENGTH, device)

    def uuid(self, index: int) -> str:
        with self._device(index) as device:
            return self._lib.text("mtmlDeviceGetUUID", UUID_LENGTH, device)

    def cores(self, index: int) -> int:
        """MUSA cores."""
        with self._device(index) as device:
            return self._lib.uint("mtmlDeviceCountGpuCores", device)

    def bus_id(self, index: int) -> str:
        info = PciInfo()
        with self._device(index) as device:
            self._lib.call("mtmlDeviceGetPciInfo", device, ctypes.byref(info))
        return clib.text(info.sbdf) or f"{info.segment:04x}:{info.bus:02x}:{info.device:02x}.0"

    def _memory_handle(self, device: c_void_p) -> contextlib.AbstractContextManager[c_void_p]:
        return self._handle("mtmlDeviceInitMemory", "mtmlDeviceFreeMemory", device)

    def memory(self, index: int) -> Memory:
        total, used = c_uint64(), c_uint64()
        with self._device(index) as device, self._memory_handle(device) as memory:
            self._lib.call("mtmlMemoryGetTotal", memory, ctypes.byref(total))
            self._lib.call("mtmlMemoryGetUsed", memory, ctypes.byref(used))
        return Memory(total.value // MIB, used.value // MIB)

    def health(self, index: int) -> bool | None:
        """False when VRAM reports volatile uncorrected ECC errors; None when ECC cannot be read here."""
        errors = c_ulonglong()
        if not clib.offered(UNSUPPORTED, self._uncorrected, index, errors):
            return None
        return errors.value == 0

    def _uncorrected(self, index: int, errors: c_ulonglong) -> None:
        with self._device(index) as device, self._memory_handle(device) as memory:
            self._lib.call(
                "mtmlMemoryGetEccErrorCounter",
                memory,
                ERROR_UNCORRECTED,
                VOLATILE_ECC,
                LOCATION_DRAM,
                ctypes.byref(errors),
            )

    def _gpu_reading(self, name: str, index: int) -> int:
        with (
            self._device(index) as device,
            self._handle("mtmlDeviceInitGpu", "mtmlDeviceFreeGpu", device) as gpu,
        ):
            return self._lib.uint(name, gpu)

    def utilization(self, index: int) -> int:
        return self._gpu_reading("mtmlGpuGetUtilization", index)

    def temperature(self, index: int) -> int:
        return self._gpu_reading("mtmlGpuGetTemperature", index)
