"""Our binding of Iluvatar's IXML (`libixml.so`, shipped with the CoreX SDK): the calls detection needs.

IXML is NVML's C API under Iluvatar's library name, plus a few `ixml*` calls of its own (the health
query). Iluvatar publishes no Python package for it, and importing nvidia-ml-py against it would bind the
NVIDIA names to the wrong library, so this module declares the few functions the detector reads with
their prototypes, structure layouts and error codes as `ixml.h` gives them (gpustack-runtime's pyixml
records the same facts); the code is ours. Cards are addressed by an opaque handle from their index.
Imported only when the bus shows an Iluvatar card (``clib``).
"""

from __future__ import annotations

import ctypes
import os
from ctypes import POINTER, Structure, c_char, c_int, c_longlong, c_uint, c_ulonglong, c_void_p
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from gpustack_operator.device_manager.detector import clib

COREX_HOME: Final = "/usr/local/corex"


def library_paths(corex_home: str | None = None) -> tuple[str, ...]:
    """The linker's search path, then the CoreX SDK's lib64 and lib (under `$COREX_HOME`)."""
    home = Path(corex_home or os.environ.get("COREX_HOME", "") or COREX_HOME)
    return ("libixml.so", str(home / "lib64/libixml.so"), str(home / "lib/libixml.so"))


DRIVER_VERSION_LENGTH: Final = 80
NAME_LENGTH: Final = 96
UUID_LENGTH: Final = 96
BUS_ID_LEGACY_LENGTH: Final = 16
BUS_ID_LENGTH: Final = 32
MEMORY_V2: Final = 0x02000028
"""`nvmlMemory_v2`: the version word the caller puts in the v2 memory structure."""
TEMPERATURE_GPU: Final = 0

ERROR_NOT_SUPPORTED: Final = 3
ERROR_FUNCTION_NOT_FOUND: Final = 13
UNSUPPORTED: Final = frozenset({ERROR_NOT_SUPPORTED, ERROR_FUNCTION_NOT_FOUND, None})
"""Answers that mean "this query does not exist here", not "this card is broken"."""
HEALTH_OK: Final = 0
"""`ixmlDeviceGetHealth` answers a bit set of faults: SYSHUB 0x1, MC 0x2, ECC 0x10, memory 0x20, PCIe 0x40."""


class Memory(Structure):
    """Bytes."""

    _fields_ = (("total", c_ulonglong), ("free", c_ulonglong), ("used", c_ulonglong))


class MemoryV2(Structure):
    _fields_ = (
        ("version", c_uint),
        ("total", c_ulonglong),
        ("reserved", c_ulonglong),
        ("free", c_ulonglong),
        ("used", c_ulonglong),
    )


class PciInfo(Structure):
    """`nvmlPciInfo_t` of `nvmlDeviceGetPciInfo_v3`."""

    _fields_ = (
        ("busIdLegacy", c_char * BUS_ID_LEGACY_LENGTH),
        ("domain", c_uint),
        ("bus", c_uint),
        ("device", c_uint),
        ("pciDeviceId", c_uint),
        ("pciSubSystemId", c_uint),
        ("busId", c_char * BUS_ID_LENGTH),
    )


class Utilization(Structure):
    _fields_ = (("gpu", c_uint), ("memory", c_uint))


_HANDLE = c_void_p
_TEXT_OUT = (POINTER(c_char), c_uint)
PROTOTYPES: Final[dict[str, clib.Prototype]] = {
    "nvmlInitWithFlags": (c_int, (c_uint,)),
    "nvmlSystemGetDriverVersion": (c_int, _TEXT_OUT),
    "nvmlSystemGetCudaDriverVersion": (c_int, (POINTER(c_int),)),
    "nvmlDeviceGetCount_v2": (c_int, (POINTER(c_uint),)),
    "nvmlDeviceGetHandleByIndex_v2": (c_int, (c_uint, POINTER(_HANDLE))),
    "nvmlDeviceGetName": (c_int, (_HANDLE, *_TEXT_OUT)),
    "nvmlDeviceGetUUID": (c_int, (_HANDLE, *_TEXT_OUT)),
    "nvmlDeviceGetMinorNumber": (c_int, (_HANDLE, POINTER(c_uint))),
    "nvmlDeviceGetNumGpuCores": (c_int, (_HANDLE, POINTER(c_uint))),
    "nvmlDeviceGetCudaComputeCapability": (c_int, (_HANDLE, POINTER(c_int), POINTER(c_int))),
    "nvmlDeviceGetMemoryInfo_v2": (c_int, (_HANDLE, POINTER(MemoryV2))),
    "nvmlDeviceGetMemoryInfo": (c_int, (_HANDLE, POINTER(Memory))),
    "nvmlDeviceGetPciInfo_v3": (c_int, (_HANDLE, POINTER(PciInfo))),
    "ixmlDeviceGetHealth": (c_int, (_HANDLE, POINTER(c_longlong))),
    "nvmlDeviceGetUtilizationRates": (c_int, (_HANDLE, POINTER(Utilization))),
    "nvmlDeviceGetTemperature": (c_int, (_HANDLE, c_uint, POINTER(c_uint))),
}

MIB: Final = 1 << 20


@dataclass(frozen=True)
class MemoryUse:
    total_mib: int
    used_mib: int


class Ixml:
    """IXML's answers as Python values, per card index; every failure is ``clib.CallError``."""

    def __init__(self, handle: Any) -> None:
        self._lib = clib.Library(handle, PROTOTYPES)

    @classmethod
    def open(cls, handle: Any = None) -> Ixml:
        """``handle`` (default: libixml.so), initialised; LibraryUnavailableError saying why the library
        cannot be loaded, CallError when it will not initialise."""
        loaded = handle if handle is not None else clib.load(library_paths(), "Iluvatar IXML (libixml.so)")
        ixml = cls(loaded)
        ixml._lib.call("nvmlInitWithFlags", 0)
        return ixml

    def _text(self, name: str, length: int, *args: Any) -> str:
        buffer = ctypes.create_string_buffer(length)
        self._lib.call(name, *args, buffer, length)
        return clib.text(buffer.raw)

    def _uint(self, name: str, *args: Any) -> int:
        value = c_uint()
        self._lib.call(name, *args, ctypes.byref(value))
        return value.value

    def _device(self, index: int) -> c_void_p:
        device = c_void_p()
        self._lib.call("nvmlDeviceGetHandleByIndex_v2", index, ctypes.byref(device))
        return device

    def driver_version(self) -> str:
        return self._text("nvmlSystemGetDriverVersion", DRIVER_VERSION_LENGTH)

    def cuda_driver_version(self) -> int:
        """The CUDA version CoreX implements, as NVML's integer (10020 for 10.2)."""
        value = c_int()
        self._lib.call("nvmlSystemGetCudaDriverVersion", ctypes.byref(value))
        return value.value

    def count(self) -> int:
        return self._uint("nvmlDeviceGetCount_v2")

    def name(self, index: int) -> str:
        return self._text("nvmlDeviceGetName", NAME_LENGTH, self._device(index))

    def uuid(self, index: int) -> str:
        return self._text("nvmlDeviceGetUUID", UUID_LENGTH, self._device(index))

    def minor(self, index: int) -> int:
        """N of the card's `/dev/iluvatarN`."""
        return self._uint("nvmlDeviceGetMinorNumber", self._device(index))

    def cores(self, index: int) -> int:
        return self._uint("nvmlDeviceGetNumGpuCores", self._device(index))

    def compute_capability(self, index: int) -> str:
        major, minor = c_int(), c_int()
        self._lib.call(
            "nvmlDeviceGetCudaComputeCapability",
            self._device(index),
            ctypes.byref(major),
            ctypes.byref(minor),
        )
        return f"{major.value}.{minor.value}"

    def memory(self, index: int) -> MemoryUse:
        """The v2 structure, or the v1 one where the library lacks or refuses v2."""
        device = self._device(index)
        try:
            v2 = MemoryV2(version=MEMORY_V2)
            self._lib.call("nvmlDeviceGetMemoryInfo_v2", device, ctypes.byref(v2))
            return MemoryUse(int(v2.total) // MIB, int(v2.used) // MIB)
        except clib.CallError:
            v1 = Memory()
            self._lib.call("nvmlDeviceGetMemoryInfo", device, ctypes.byref(v1))
            return MemoryUse(int(v1.total) // MIB, int(v1.used) // MIB)

    def bus_id(self, index: int) -> str:
        info = PciInfo()
        self._lib.call("nvmlDeviceGetPciInfo_v3", self._device(index), ctypes.byref(info))
        return clib.text(info.busId) or clib.text(info.busIdLegacy)

    def health_ok(self, index: int) -> bool | None:
        """False when IXML reports any fault bit; None when this driver has no health query."""
        faults = c_longlong()
        try:
            self._lib.call("ixmlDeviceGetHealth", self._device(index), ctypes.byref(faults))
        except clib.CallError as exc:
            if exc.code in UNSUPPORTED:
                return None
            raise
        return faults.value == HEALTH_OK

    def utilization(self, index: int) -> int:
        rates = Utilization()
        self._lib.call("nvmlDeviceGetUtilizationRates", self._device(index), ctypes.byref(rates))
        return int(rates.gpu)

    def temperature(self, index: int) -> int:
        return self._uint("nvmlDeviceGetTemperature", self._device(index), TEMPERATURE_GPU)
