"""NVML's C API under another vendor's library: what Iluvatar's IXML and T-Head's HGML share.

Iluvatar's `libixml.so` exports NVML's own function names; T-Head's `libhgml.so` renames them `hgml*`
(and says HGGC where NVML says CUDA). Both keep NVML's prototypes, structure layouts (sizes in bytes, the
v3 PCI info, the v2 memory structure and its version word), error codes and handle model (an opaque
pointer per card index), as their headers (`ixml.h`, `hgml.h`) and the vendors' Python bindings record
them. So one binding reads both; a vendor module names the library's functions (``Api``) and adds its
own health query. Imported only by those vendor modules, when the bus shows their cards (``clib``).
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, Structure, c_char, c_int, c_uint, c_ulonglong, c_void_p
from dataclasses import dataclass
from typing import ClassVar, Final

from gpustack_operator.device_manager.detector import clib
from gpustack_operator.device_manager.detector.nvidia import runtime_version

DRIVER_VERSION_LENGTH: Final = 80
NAME_LENGTH: Final = 96
UUID_LENGTH: Final = 96
BUS_ID_LEGACY_LENGTH: Final = 16
BUS_ID_LENGTH: Final = 32
MEMORY_V2: Final = 0x02000028
"""`nvmlMemory_v2`: the version word the caller puts in the v2 memory structure."""
TEMPERATURE_GPU: Final = 0
MIB: Final = 1 << 20

ERROR_NOT_SUPPORTED: Final = 3
ERROR_FUNCTION_NOT_FOUND: Final = 13
UNSUPPORTED: Final = frozenset({ERROR_NOT_SUPPORTED, ERROR_FUNCTION_NOT_FOUND, None})
"""Answers that mean "this query does not exist here", not "this card is broken"."""


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


HANDLE: Final = c_void_p
_TEXT_OUT = (POINTER(c_char), c_uint)


@dataclass(frozen=True)
class Api:
    """The library's names for NVML's functions: ``prefix`` (`nvml`, `hgml`) on NVML's own names, except
    the two that name the runtime (CUDA on NVML, HGGC on HGML)."""

    prefix: str
    runtime_version: str
    """`int *version` of the runtime the driver implements, as NVML's integer (12040 for 12.4)."""
    compute_capability: str

    def __call__(self, suffix: str) -> str:
        """`DeviceGetName` -> `hgmlDeviceGetName`."""
        return f"{self.prefix}{suffix}"

    def prototypes(self) -> dict[str, clib.Prototype]:
        by_handle = {
            "DeviceGetName": (c_int, (HANDLE, *_TEXT_OUT)),
            "DeviceGetUUID": (c_int, (HANDLE, *_TEXT_OUT)),
            "DeviceGetMinorNumber": (c_int, (HANDLE, POINTER(c_uint))),
            "DeviceGetNumGpuCores": (c_int, (HANDLE, POINTER(c_uint))),
            "DeviceGetMemoryInfo_v2": (c_int, (HANDLE, POINTER(MemoryV2))),
            "DeviceGetMemoryInfo": (c_int, (HANDLE, POINTER(Memory))),
            "DeviceGetPciInfo_v3": (c_int, (HANDLE, POINTER(PciInfo))),
            "DeviceGetUtilizationRates": (c_int, (HANDLE, POINTER(Utilization))),
            "DeviceGetTemperature": (c_int, (HANDLE, c_uint, POINTER(c_uint))),
        }
        return {
            self("InitWithFlags"): (c_int, (c_uint,)),
            self("SystemGetDriverVersion"): (c_int, _TEXT_OUT),
            self.runtime_version: (c_int, (POINTER(c_int),)),
            self("DeviceGetCount_v2"): (c_int, (POINTER(c_uint),)),
            self("DeviceGetHandleByIndex_v2"): (c_int, (c_uint, POINTER(HANDLE))),
            self.compute_capability: (c_int, (HANDLE, POINTER(c_int), POINTER(c_int))),
            **{self(suffix): prototype for suffix, prototype in by_handle.items()},
        }


@dataclass(frozen=True)
class MemoryUse:
    total_mib: int
    used_mib: int


class NvmlShaped(clib.Binding):
    """An NVML-shaped library's answers as Python values, per card index; every failure is
    ``clib.CallError``. A vendor subclass sets ``API``, ``PROTOTYPES`` and ``LABEL``."""

    API: ClassVar[Api]

    def init(self) -> None:
        self._lib.call(self.API("InitWithFlags"), 0)

    def _device(self, index: int) -> c_void_p:
        device = c_void_p()
        self._lib.call(self.API("DeviceGetHandleByIndex_v2"), index, ctypes.byref(device))
        return device

    def _by_device(self, suffix: str, index: int, *args: object) -> None:
        """``<prefix><suffix>(handle of card index, *args)``."""
        self._lib.call(self.API(suffix), self._device(index), *args)

    def driver_version(self) -> str:
        return self._lib.text(self.API("SystemGetDriverVersion"), DRIVER_VERSION_LENGTH)

    def runtime_version(self) -> str:
        """The runtime version the driver implements, major.minor: NVML's integer (10020) as `10.2`."""
        return runtime_version(self._lib.sint(self.API.runtime_version))

    def count(self) -> int:
        return self._lib.uint(self.API("DeviceGetCount_v2"))

    def name(self, index: int) -> str:
        return self._lib.text(self.API("DeviceGetName"), NAME_LENGTH, self._device(index))

    def uuid(self, index: int) -> str:
        return self._lib.text(self.API("DeviceGetUUID"), UUID_LENGTH, self._device(index))

    def minor(self, index: int) -> int:
        return self._lib.uint(self.API("DeviceGetMinorNumber"), self._device(index))

    def cores(self, index: int) -> int:
        return self._lib.uint(self.API("DeviceGetNumGpuCores"), self._device(index))

    def compute_capability(self, index: int) -> str:
        major, minor = c_int(), c_int()
        self._lib.call(
            self.API.compute_capability, self._device(index), ctypes.byref(major), ctypes.byref(minor)
        )
        return f"{major.value}.{minor.value}"

    def memory(self, index: int) -> MemoryUse:
        """The v2 structure, or the v1 one where the library lacks or refuses v2."""
        device = self._device(index)
        try:
            v2 = MemoryV2(version=MEMORY_V2)
            self._lib.call(self.API("DeviceGetMemoryInfo_v2"), device, ctypes.byref(v2))
            return MemoryUse(int(v2.total) // MIB, int(v2.used) // MIB)
        except clib.CallError:
            v1 = Memory()
            self._lib.call(self.API("DeviceGetMemoryInfo"), device, ctypes.byref(v1))
            return MemoryUse(int(v1.total) // MIB, int(v1.used) // MIB)

    def bus_id(self, index: int) -> str:
        info = PciInfo()
        self._by_device("DeviceGetPciInfo_v3", index, ctypes.byref(info))
        return clib.text(info.busId) or clib.text(info.busIdLegacy)

    def utilization(self, index: int) -> int:
        rates = Utilization()
        self._by_device("DeviceGetUtilizationRates", index, ctypes.byref(rates))
        return int(rates.gpu)

    def temperature(self, index: int) -> int:
        return self._lib.uint(self.API("DeviceGetTemperature"), self._device(index), TEMPERATURE_GPU)
