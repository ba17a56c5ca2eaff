"""Our binding of Cambricon's CNDev (`libcndev.so`, shipped with the MLU driver): the calls detection needs.

Cambricon publishes CNDev as a C library and header (`cndev.h`) only. The prototypes, structure layouts,
API version stamps and error codes below are the header's facts (as gpustack-runtime's pycndev and
Cambricon's device plugin also declare them); the code is ours and covers only what the detector reads:
the card count and handles, each MLU's name, UUID, memory, MLU-core count, driver version, health flag,
ECC counters and PCI address, plus core busy share and chip temperature for `monitor`.

CNDev addresses a card by a handle (`cndevDevice_t`, a 32-bit int) got from its index; drivers that
predate handles take the index itself. Most structures start with an `int version` the caller stamps
with the API version it speaks; a driver older than that answers `CNDEV_ERROR_UNSUPPORTED_API_VERSION`,
so each versioned query is retried with the previous version. Sizes are in MB as the header says, which
CNDev means as MiB (cnmon prints the same numbers as MiB). This module is imported only when the bus
shows a Cambricon card (see ``clib``).
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Mapping
from ctypes import POINTER, Structure, c_char, c_int32, c_int64, c_uint16, c_uint32, c_uint64, c_void_p
from dataclasses import dataclass
from typing import Any, Final

from gpustack_operator.device_manager.detector import clib

MAX_CARDS: Final = 64
UUID_SIZE: Final = 37
API_VERSIONS: Final = (6, 5)
"""`CNDEV_VERSION_6`, then `CNDEV_VERSION_5` for a driver that does not speak 6."""

ERROR_UNSUPPORTED_API_VERSION: Final = 3
ERROR_NOT_SUPPORTED: Final = 10
UNSUPPORTED: Final = frozenset({ERROR_NOT_SUPPORTED, None})
"""Answers that mean "this query does not exist here", not "this card is broken"."""

HEALTH_GOOD: Final = 1
HEALTH_IN_PROBLEM: Final = 0
"""`cndevCardHealthState_t.health`: 1 healthy, 0 sick."""

CARD_NAMES: Final[Mapping[int, str]] = {
    0: "MLU100",
    1: "MLU270",
    16: "MLU220",
    17: "MLU220",
    18: "MLU220",
    19: "MLU220",
    20: "MLU290",
    23: "MLU370",
    24: "MLU365",
    25: "CE3226",
    26: "MLU590",
    27: "MLU585",
    30: "MLU580",
    31: "MLU570",
}
"""`cndevNameEnum_t`, for drivers that give the name only as this enum."""


def library_paths(environ: Mapping[str, str] = os.environ) -> tuple[str, ...]:
    """The linker's search path, then the Neuware home (`$NEUWARE_HOME`, default `/usr/local/neuware`)."""
    home = environ.get("NEUWARE_HOME") or "/usr/local/neuware"
    return ("libcndev.so", f"{home}/lib64/libcndev.so", f"{home}/lib/libcndev.so")


class CardInfo(Structure):
    _fields_ = (("version", c_int32), ("number", c_uint32))


class Uuid(Structure):
    _fields_ = (("version", c_int32), ("uuid", c_char * UUID_SIZE), ("ncsUUID64", c_uint64))


class MemoryInfoV2(Structure):
    """`cndevMemoryInfoV2_t` (no version field; MB)."""

    _fields_ = (
        ("physicalMemoryTotal", c_int64),
        ("physicalMemoryUsed", c_int64),
        ("reservedMemory", c_int64),
        ("virtualMemoryTotal", c_int64),
        ("virtualMemoryUsed", c_int64),
        ("globalMemory", c_uint64),
        ("reserved", c_uint64 * 16),
    )


class VersionInfo(Structure):
    _fields_ = (
        ("version", c_int32),
        ("mcuMajorVersion", c_uint32),
        ("mcuMinorVersion", c_uint32),
        ("mcuBuildVersion", c_uint32),
        ("driverMajorVersion", c_uint32),
        ("driverMinorVersion", c_uint32),
        ("driverBuildVersion", c_uint32),
    )


class EccInfo(Structure):
    _fields_ = (
        ("version", c_int32),
        ("oneBitError", c_uint64),
        ("multipleOneError", c_uint64),
        ("multipleError", c_uint64),
        ("multipleMultipleError", c_uint64),
        ("correctedError", c_uint64),
        ("uncorrectedError", c_uint64),
        ("totalError", c_uint64),
        ("addressForbiddenError", c_uint64),
    )


class CoreCount(Structure):
    _fields_ = (("version", c_int32), ("count", c_int32))


class CardName(Structure):
    _fields_ = (("version", c_int32), ("id", c_int32))


class PcieInfoV2(Structure):
    """`cndevPCIeInfoV2_t` (no version field)."""

    _fields_ = (
        ("subsystemId", c_uint32),
        ("deviceId", c_uint32),
        ("vendor", c_uint16),
        ("subsystemVendor", c_uint16),
        ("domain", c_uint32),
        ("bus", c_uint32),
        ("device", c_uint32),
        ("function", c_uint32),
        ("moduleId", c_uint16),
        ("slotId", c_uint16),
        ("reserved", c_uint32 * 8),
    )


class HealthState(Structure):
    """`cndevCardHealthState_t` (V1: the V2 structure carries 64 incident reports we do not read)."""

    _fields_ = (
        ("version", c_int32),
        ("health", c_int32),
        ("deviceState", c_int32),
        ("driverState", c_int32),
    )


class UtilizationInfo(Structure):
    _fields_ = (("version", c_int32), ("averageCoreUtilization", c_int32), ("coreUtilization", c_int32 * 80))


class TemperatureInfo(Structure):
    _fields_ = (
        ("version", c_int32),
        ("board", c_int32),
        ("cluster", c_int32 * 20),
        ("memoryDie", c_int32 * 8),
        ("chip", c_int32),
        ("airInlet", c_int32),
        ("airOutlet", c_int32),
        ("memory", c_int32),
        ("videoInput", c_int32),
        ("cpu", c_int32),
        ("isp", c_int32),
    )


def _by_device(structure: Any) -> clib.Prototype:
    """`cndevRet_t f(<structure> *out, cndevDevice_t device)`, CNDev's usual shape."""
    return (c_int32, (POINTER(structure), c_int32))


PROTOTYPES: Final[dict[str, clib.Prototype]] = {
    "cndevInit": (c_int32, (c_int32,)),
    "cndevGetDeviceCount": (c_int32, (POINTER(CardInfo),)),
    "cndevGetDeviceHandleByIndex": (c_int32, (c_int32, POINTER(c_int32))),
    "cndevGetUUID": _by_device(Uuid),
    "cndevGetMemoryUsageV2": _by_device(MemoryInfoV2),
    "cndevGetVersionInfo": _by_device(VersionInfo),
    "cndevGetECCInfo": _by_device(EccInfo),
    "cndevGetCoreCount": _by_device(CoreCount),
    "cndevGetCardName": _by_device(CardName),
    "cndevGetCardNameStringByDevId": (c_void_p, (c_int32,)),
    "cndevGetPCIeInfoV2": _by_device(PcieInfoV2),
    "cndevGetCardHealthState": _by_device(HealthState),
    "cndevGetDeviceUtilizationInfo": _by_device(UtilizationInfo),
    "cndevGetTemperatureInfo": _by_device(TemperatureInfo),
}
"""`cndevGetCardNameStringByDevId` returns `const char *`: declared as an address (the same ABI) and read
with ``ctypes.string_at``, since a C string returned from a recorded callback would not outlive it."""


@dataclass(frozen=True)
class Memory:
    total_mib: int
    used_mib: int


class Cndev(clib.Binding):
    """CNDev's answers as Python values; every failure is ``clib.CallError`` with CNDev's code."""

    PROTOTYPES = PROTOTYPES
    LABEL = "Cambricon CNDev (libcndev.so)"

    @classmethod
    def library_paths(cls) -> tuple[str, ...]:
        """libcndev.so from the driver or Neuware."""
        return library_paths()

    def init(self) -> None:
        self._lib.call("cndevInit", 0)

    def _versioned(self, name: str, structure: Any, *args: Any) -> Any:
        """``name`` filled into a fresh ``structure`` stamped with the newest API version the driver takes."""
        for version in API_VERSIONS:
            out = structure()
            out.version = version
            try:
                self._lib.call(name, ctypes.byref(out), *args)
            except clib.CallError as exc:
                if exc.code == ERROR_UNSUPPORTED_API_VERSION and version != API_VERSIONS[-1]:
                    continue
                raise
            return out
        raise AssertionError("unreachable")  # pragma: no cover

    def _plain(self, name: str, structure: Any, device: int) -> Any:
        out = structure()
        self._lib.call(name, ctypes.byref(out), device)
        return out

    def count(self) -> int:
        number = int(self._versioned("cndevGetDeviceCount", CardInfo).number)
        if not 0 <= number <= MAX_CARDS:
            raise clib.CallError(f"cndevGetDeviceCount (count {number})", -1)
        return number

    def handle(self, index: int) -> int:
        """The device handle of the card at ``index``; the index itself on drivers without handles."""
        if not self._lib.has("cndevGetDeviceHandleByIndex"):
            return index
        return self._lib.sint("cndevGetDeviceHandleByIndex", index)

    def uuid(self, device: int) -> str:
        """`MLU-<uuid>`, as cnmon and the container toolkit name the card; "" when the driver gives none."""
        raw = clib.text(bytes(self._versioned("cndevGetUUID", Uuid, device).uuid))
        return f"MLU-{raw}" if raw else ""

    def name(self, device: int) -> str:
        """The card's name (`MLU370-X8`): the name string, else the name enum; "" when neither is known."""
        if self._lib.has("cndevGetCardNameStringByDevId"):
            address = self._lib.function("cndevGetCardNameStringByDevId")(device)
            name = clib.text(ctypes.string_at(address)) if address else ""
            if name:
                return name
        return CARD_NAMES.get(int(self._versioned("cndevGetCardName", CardName, device).id), "")

    def memory(self, device: int) -> Memory:
        info = self._plain("cndevGetMemoryUsageV2", MemoryInfoV2, device)
        return Memory(int(info.physicalMemoryTotal), int(info.physicalMemoryUsed))

    def cores(self, device: int) -> int:
        return int(self._versioned("cndevGetCoreCount", CoreCount, device).count)

    def driver_version(self, device: int) -> str:
        info = self._versioned("cndevGetVersionInfo", VersionInfo, device)
        return f"{info.driverMajorVersion}.{info.driverMinorVersion}.{info.driverBuildVersion}"

    def health(self, device: int) -> int | None:
        """1 healthy, 0 in problem (cnmon's health flag); None when this driver cannot answer the query at
        all. Any other failure is CallError."""
        try:
            return int(self._versioned("cndevGetCardHealthState", HealthState, device).health)
        except clib.CallError as exc:
            if exc.code in UNSUPPORTED:
                return None
            raise

    def uncorrectable_ecc(self, device: int) -> int:
        return int(self._versioned("cndevGetECCInfo", EccInfo, device).uncorrectedError)

    def bus_id(self, device: int) -> str:
        info = self._plain("cndevGetPCIeInfoV2", PcieInfoV2, device)
        return f"{info.domain:04x}:{info.bus:02x}:{info.device:02x}.{info.function:x}"

    def utilization(self, device: int) -> int:
        return int(
            self._versioned("cndevGetDeviceUtilizationInfo", UtilizationInfo, device).averageCoreUtilization
        )

    def temperature(self, device: int) -> int:
        return int(self._versioned("cndevGetTemperatureInfo", TemperatureInfo, device).chip)
