"""Our binding of MetaX's MXSML (`libmxsml.so`, shipped with the MetaX driver and MACA): what detection reads.

MetaX publishes MXSML as a C library and header only. The prototypes, structure layouts, units and error
codes below are the facts of `mxsml.h` (as gpustack-runtime's pymxsml also declares them); the code is
ours and covers only what the detector reads: the card count, each card's name, UUID, PCI address and
virtualisation mode, its VRAM, ECC counters, driver version, compute (xcore) use and temperature, and the
node's MACA version. MXSML numbers cards 0..n-1. Imported only when the bus shows a MetaX card (``clib``).
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, Structure, c_char, c_int, c_long, c_uint
from dataclasses import dataclass
from typing import Final

from gpustack_operator.device_manager.detector import clib

LIBRARY_PATHS: Final = (
    "libmxsml.so",
    "/opt/mxdriver/lib/libmxsml.so",
    "/opt/maca/lib/libmxsml.so",
    "/opt/mxn100/lib/libmxsml.so",
)
"""The linker's search path, then where the driver, MACA and the N100 package install it."""

BDF_LENGTH: Final = 32
UUID_LENGTH: Final = 96
NAME_LENGTH: Final = 32
VERSION_LENGTH: Final = 64

ERROR_OPERATION_NOT_SUPPORT: Final = 3
ERROR_FUNCTION_NOT_FOUND: Final = 999
UNSUPPORTED: Final = frozenset({ERROR_OPERATION_NOT_SUPPORT, ERROR_FUNCTION_NOT_FOUND, None})
"""Answers that mean "this query does not exist here", not "this card is broken"."""

MODE_VF: Final = 2
"""`mxSmlDeviceVirtualizationMode_t`: bare metal (0), physical function (1), virtual function (2)."""
VERSION_DRIVER: Final = 1
USAGE_XCORE: Final = 4
"""`mxSmlUsageIp_t` of the compute cores (C-class cards)."""
TEMPERATURE_HOTSPOT: Final = 0


class DeviceInfo(Structure):
    _fields_ = (
        ("deviceId", c_uint),
        ("type", c_uint),
        ("bdfId", c_char * BDF_LENGTH),
        ("gpuId", c_uint),
        ("nodeId", c_uint),
        ("uuid", c_char * UUID_LENGTH),
        ("brand", c_uint),
        ("mode", c_uint),
        ("deviceName", c_char * NAME_LENGTH),
    )


class MemoryInfo(Structure):
    """KiB."""

    _fields_ = (
        ("visVramTotal", c_long),
        ("visVramUse", c_long),
        ("vramTotal", c_long),
        ("vramUse", c_long),
        ("xttTotal", c_long),
        ("xttUse", c_long),
    )


class EccErrorCount(Structure):
    _fields_ = (
        ("sramCE", c_uint),
        ("sramUE", c_uint),
        ("dramCE", c_uint),
        ("dramUE", c_uint),
        ("retiredPage", c_uint),
    )


_TEXT_OUT = (POINTER(c_char), POINTER(c_uint))
PROTOTYPES: Final[dict[str, clib.Prototype]] = {
    "mxSmlInit": (c_int, ()),
    "mxSmlGetDeviceCount": (c_uint, ()),
    "mxSmlGetMacaVersion": (c_int, _TEXT_OUT),
    "mxSmlGetDeviceVersion": (c_int, (c_uint, c_uint, *_TEXT_OUT)),
    "mxSmlGetDeviceInfo": (c_int, (c_uint, POINTER(DeviceInfo))),
    "mxSmlGetMemoryInfo": (c_int, (c_uint, POINTER(MemoryInfo))),
    "mxSmlGetTotalEccErrors": (c_int, (c_uint, POINTER(EccErrorCount))),
    "mxSmlGetDeviceIpUsage": (c_int, (c_uint, c_uint, POINTER(c_int))),
    "mxSmlGetTemperatureInfo": (c_int, (c_uint, c_uint, POINTER(c_int))),
}


@dataclass(frozen=True)
class Info:
    name: str
    uuid: str
    bus_id: str
    mode: int


@dataclass(frozen=True)
class Memory:
    total_mib: int
    used_mib: int


class Mxsml(clib.Binding):
    """MXSML's answers as Python values; every failure is ``clib.CallError`` with MXSML's code."""

    PROTOTYPES = PROTOTYPES
    LABEL = "MetaX MXSML (libmxsml.so)"

    @classmethod
    def library_paths(cls) -> tuple[str, ...]:
        return LIBRARY_PATHS

    def init(self) -> None:
        self._lib.call("mxSmlInit")

    def count(self) -> int:
        """The number of cards (MXSML answers the count itself, not an error code)."""
        return int(self._lib.function("mxSmlGetDeviceCount")())

    def _text(self, name: str, *args: int) -> str:
        """MXSML's text answers: a buffer and a pointer to its size."""
        buffer, size = ctypes.create_string_buffer(VERSION_LENGTH), c_uint(VERSION_LENGTH)
        self._lib.call(name, *args, buffer, ctypes.byref(size))
        return clib.text(buffer.raw)

    def maca_version(self) -> str:
        """The MACA software stack's version (`2.32.0.6`)."""
        return self._text("mxSmlGetMacaVersion")

    def driver_version(self, index: int) -> str:
        return self._text("mxSmlGetDeviceVersion", index, VERSION_DRIVER)

    def info(self, index: int) -> Info:
        info = DeviceInfo()
        self._lib.call("mxSmlGetDeviceInfo", index, ctypes.byref(info))
        return Info(clib.text(info.deviceName), clib.text(info.uuid), clib.text(info.bdfId), int(info.mode))

    def memory(self, index: int) -> Memory:
        info = MemoryInfo()
        self._lib.call("mxSmlGetMemoryInfo", index, ctypes.byref(info))
        return Memory(int(info.vramTotal) // 1024, int(info.vramUse) // 1024)

    def ecc_ok(self, index: int) -> bool | None:
        """False when VRAM reports uncorrectable ECC errors; None when ECC cannot be read here."""
        counts = EccErrorCount()
        if not self._lib.offered(UNSUPPORTED, "mxSmlGetTotalEccErrors", index, ctypes.byref(counts)):
            return None
        return int(counts.dramUE) == 0

    def xcore_utilization(self, index: int) -> int:
        return self._lib.sint("mxSmlGetDeviceIpUsage", index, USAGE_XCORE)

    def temperature(self, index: int) -> int:
        """Degrees Celsius of the chip's hot spot (MXSML answers hundredths)."""
        return self._lib.sint("mxSmlGetTemperatureInfo", index, TEMPERATURE_HOTSPOT) // 100
