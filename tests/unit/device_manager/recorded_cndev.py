"""Recorded CNDev answers: a stand-in for libcndev.so whose functions are C callables with CNDev's prototypes.

The values have the shape CNDev and cnmon give on an MLU370 node (names like `MLU370-X4`, memory in MiB,
a `MLU-` UUID, driver `5.10.22`), not a capture from real hardware. The stand-in answers through ctypes'
real marshalling (``clib.recorded_function``), so our structure layouts, API-version stamps, pointer
passing and return-code checks run as they do against the library.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from gpustack_operator.device_manager.detector import clib, cndev
from tests.unit.device_manager.recorded import SysfsDevice

OK = 0
INVALID_DEVICE_ID = 6
UNKNOWN = 7
NOT_SUPPORTED = cndev.ERROR_NOT_SUPPORTED
UNSUPPORTED_API_VERSION = cndev.ERROR_UNSUPPORTED_API_VERSION
BUSES = [0x1A, 0x1B, 0x3D, 0x3E]


@dataclass(frozen=True)
class RecordedMlu:
    """One card as CNDev answers it; ``errors`` maps a function to the code it returns."""

    index: int
    name: bytes = b"MLU370-X4"
    name_id: int = 23
    uuid: bytes = b""
    memory_mib: int = 24576
    memory_used_mib: int = 1021
    cores: int = 16
    driver: tuple[int, int, int] = (5, 10, 22)
    health: int = 1
    uncorrected_ecc: int = 0
    bus: tuple[int, int, int, int] = (0, 0x1A, 0, 0)
    errors: dict[str, int] = field(default_factory=dict)


def mlu370(index: int, **changes: Any) -> RecordedMlu:
    values: dict[str, Any] = {
        "index": index,
        "uuid": f"5a1b2c3d-{index:04x}-4e5f-8a9b-0c1d2e3f4a5b".encode(),
        "bus": (0, BUSES[index], 0, 0),
    }
    values.update(changes)
    return RecordedMlu(**values)


MLU370_NODE = [mlu370(i) for i in range(4)]
MLU370_PCI = [
    SysfsDevice(f"0000:{bus:02x}:00.0", "cabc", "0370", "120000", str(i // 2), "0-63", f"0000:{bus - 1:02x}")
    for i, bus in enumerate(BUSES)
]


def record_cndev(
    mlus: Sequence[RecordedMlu],
    *,
    init: int = OK,
    count: int | None = None,
    api_version: int = 6,
    missing: Sequence[str] = (),
) -> Any:
    """A recorded library answering for ``mlus`` (``api_version``: the newest it speaks; ``missing``:
    functions it does not export). Handles are the index plus 100, so a mix-up of the two shows; a
    library without handles takes the index."""
    offset = 0 if "cndevGetDeviceHandleByIndex" in missing else 100
    by_handle = {mlu.index + offset: mlu for mlu in mlus}
    names = {mlu.index: ctypes.create_string_buffer(mlu.name) for mlu in mlus}

    def on(
        name: str, answer: Callable[[RecordedMlu, Any], None], versioned: bool = True
    ) -> Callable[..., int]:
        def call(out: Any, handle: int) -> int:
            mlu = by_handle.get(handle)
            if mlu is None:
                return INVALID_DEVICE_ID
            if versioned and out.contents.version > api_version:
                return UNSUPPORTED_API_VERSION
            code = mlu.errors.get(name, OK)
            if code == OK:
                answer(mlu, out.contents)
            return code

        return call

    def device_count(out: Any) -> int:
        if out.contents.version > api_version:
            return UNSUPPORTED_API_VERSION
        out.contents.number = len(mlus) if count is None else count
        return OK

    def handle_by_index(index: int, out: Any) -> int:
        out[0] = index + offset
        return OK if index in names else INVALID_DEVICE_ID

    def name_string(handle: int) -> int | None:
        mlu = by_handle.get(handle)
        if mlu is None or "cndevGetCardNameStringByDevId" in mlu.errors:
            return None
        return ctypes.addressof(names[mlu.index])

    def fill(**values: Callable[[RecordedMlu], Any]) -> Callable[[RecordedMlu, Any], None]:
        def answer(mlu: RecordedMlu, out: Any) -> None:
            for key, value in values.items():
                setattr(out, key, value(mlu))

        return answer

    answers: dict[str, Callable[..., Any]] = {
        "cndevInit": lambda reserved: init,
        "cndevGetDeviceCount": device_count,
        "cndevGetDeviceHandleByIndex": handle_by_index,
        "cndevGetUUID": on("cndevGetUUID", fill(uuid=lambda m: m.uuid)),
        "cndevGetMemoryUsageV2": on(
            "cndevGetMemoryUsageV2",
            fill(physicalMemoryTotal=lambda m: m.memory_mib, physicalMemoryUsed=lambda m: m.memory_used_mib),
            versioned=False,
        ),
        "cndevGetVersionInfo": on(
            "cndevGetVersionInfo",
            fill(
                driverMajorVersion=lambda m: m.driver[0],
                driverMinorVersion=lambda m: m.driver[1],
                driverBuildVersion=lambda m: m.driver[2],
            ),
        ),
        "cndevGetECCInfo": on("cndevGetECCInfo", fill(uncorrectedError=lambda m: m.uncorrected_ecc)),
        "cndevGetCoreCount": on("cndevGetCoreCount", fill(count=lambda m: m.cores)),
        "cndevGetCardName": on("cndevGetCardName", fill(id=lambda m: m.name_id)),
        "cndevGetCardNameStringByDevId": name_string,
        "cndevGetPCIeInfoV2": on(
            "cndevGetPCIeInfoV2",
            fill(
                domain=lambda m: m.bus[0],
                bus=lambda m: m.bus[1],
                device=lambda m: m.bus[2],
                function=lambda m: m.bus[3],
            ),
            versioned=False,
        ),
        "cndevGetCardHealthState": on(
            "cndevGetCardHealthState", fill(health=lambda m: m.health, deviceState=lambda m: m.health)
        ),
        "cndevGetDeviceUtilizationInfo": on(
            "cndevGetDeviceUtilizationInfo", fill(averageCoreUtilization=lambda m: 42)
        ),
        "cndevGetTemperatureInfo": on("cndevGetTemperatureInfo", fill(chip=lambda m: 47)),
    }
    library = SimpleNamespace(
        **{
            name: clib.recorded_function(cndev.PROTOTYPES[name], answer)
            for name, answer in answers.items()
            if name not in missing
        }
    )
    library.keep = names  # the name strings' memory lives as long as the library
    return library


def opener(handle: Any) -> Callable[[], cndev.Cndev]:
    """What the Cambricon detector calls to open CNDev, over ``handle`` instead of libcndev.so."""
    return lambda: cndev.Cndev.open(handle)
