"""Recorded MTML answers: a stand-in for libmtml.so whose functions are C callables with MTML's prototypes.

Each card is a Moore Threads MTT S4000 (48 GiB, 8192 MUSA cores; MTML answers bytes) as MTML describes it:
name, UUID, PCI address and DRAM ECC counters. UUID and version strings have the shape MTML gives, not a
particular machine's values. Handles are numbers (library 1, system 2, device 100 + index, memory
200 + index, GPU 300 + index); ``freed`` records every handle given back, so a test can check that
none leaks. The answers pass through ctypes' real marshalling (``clib.recorded_function``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpustack_operator.device_manager.detector import mtml
from tests.unit.device_manager.recorded import SysfsDevice
from tests.unit.device_manager.recorded_clib import OK, fill, library, put, put_text

DRIVER_FAILURE = 2
INVALID_ARGUMENT = 3
NOT_SUPPORTED = mtml.ERROR_NOT_SUPPORTED
GPU_IS_LOST = 669
BUSES = [0x19, 0x3B, 0x4C, 0x5D, 0x9B, 0xBB, 0xCB, 0xDB]


@dataclass(frozen=True)
class RecordedGpu:
    """One card as MTML answers it; ``errors`` maps a function to the code it returns."""

    bus: int
    uuid: bytes
    name: bytes = b"MTT S4000"
    memory_bytes: int = 48 << 30
    used_bytes: int = 512 << 20
    cores: int = 8192
    uncorrected: int = 0
    errors: dict[str, int] = field(default_factory=dict)


def s4000(index: int, **changes: Any) -> RecordedGpu:
    values: dict[str, Any] = {
        "bus": BUSES[index],
        "uuid": f"8a1f2c3d-4e5f-6071-8293-a4b5c6d7e8{index:02d}".encode(),
    }
    values.update(changes)
    return RecordedGpu(**values)


EIGHT_S4000 = [s4000(i) for i in range(8)]
S4000_PCI = [
    SysfsDevice(f"0000:{bus:02x}:00.0", "1ed5", "0327", "030000", str(i // 4)) for i, bus in enumerate(BUSES)
]


def record_mtml(
    gpus: Sequence[RecordedGpu],
    *,
    driver: bytes = b"2.7.0",
    init: int = OK,
    count: int | None = None,
    missing: Sequence[str] = (),
    freed: list[int] | None = None,
) -> Any:
    """A recorded library answering for ``gpus`` in index order (``missing``: functions it lacks)."""

    def on(name: str, base: int, answer: Callable[..., int]) -> Callable[..., int]:
        """``answer`` for the card whose handle (device, memory or GPU: ``base`` + index) comes first."""

        def call(handle: int | None, *rest: Any) -> int:
            index = (handle or 0) - base
            if not 0 <= index < len(gpus):
                return INVALID_ARGUMENT
            code = gpus[index].errors.get(name, OK)
            return code if code != OK else answer(gpus[index], *rest)

        return call

    def device_by_index(lib: int | None, index: int, out: Any) -> int:
        if lib != 1 or not 0 <= index < len(gpus):
            return INVALID_ARGUMENT
        code = gpus[index].errors.get("mtmlLibraryInitDeviceByIndex", OK)
        return code if code != OK else put(out, 100 + index)

    def free(handle: int | None) -> int:
        if freed is not None:
            freed.append(handle or 0)
        return OK

    def ecc(gpu: RecordedGpu, error_type: int, counter: int, location: int, out: Any) -> int:
        wanted = (mtml.ERROR_UNCORRECTED, mtml.VOLATILE_ECC, mtml.LOCATION_DRAM)
        return put(out, gpu.uncorrected if (error_type, counter, location) == wanted else 0)

    answers: dict[str, Callable[..., int]] = {
        "mtmlLibraryInit": lambda out: init or put(out, 1),
        "mtmlLibraryInitSystem": lambda lib, out: put(out, 2),
        "mtmlLibraryFreeSystem": free,
        "mtmlSystemGetDriverVersion": lambda system, out, length: put_text(out, length, driver),
        "mtmlLibraryCountDevice": lambda lib, out: put(out, len(gpus) if count is None else count),
        "mtmlLibraryInitDeviceByIndex": device_by_index,
        "mtmlLibraryFreeDevice": free,
        "mtmlDeviceGetName": on(
            "mtmlDeviceGetName", 100, lambda gpu, out, length: put_text(out, length, gpu.name)
        ),
        "mtmlDeviceGetUUID": on(
            "mtmlDeviceGetUUID", 100, lambda gpu, out, length: put_text(out, length, gpu.uuid)
        ),
        "mtmlDeviceCountGpuCores": on("mtmlDeviceCountGpuCores", 100, lambda gpu, out: put(out, gpu.cores)),
        "mtmlDeviceGetPciInfo": on(
            "mtmlDeviceGetPciInfo",
            100,
            lambda gpu, out: fill(
                out, sbdf=f"0000:{gpu.bus:02x}:00.0".encode(), bus=gpu.bus, pciDeviceId=0x03271ED5
            ),
        ),
        "mtmlDeviceInitMemory": lambda device, out: put(out, 100 + (device or 0)),
        "mtmlDeviceFreeMemory": free,
        "mtmlMemoryGetTotal": on("mtmlMemoryGetTotal", 200, lambda gpu, out: put(out, gpu.memory_bytes)),
        "mtmlMemoryGetUsed": on("mtmlMemoryGetUsed", 200, lambda gpu, out: put(out, gpu.used_bytes)),
        "mtmlMemoryGetEccErrorCounter": on("mtmlMemoryGetEccErrorCounter", 200, ecc),
        "mtmlDeviceInitGpu": lambda device, out: put(out, 200 + (device or 0)),
        "mtmlDeviceFreeGpu": free,
        "mtmlGpuGetUtilization": on("mtmlGpuGetUtilization", 300, lambda gpu, out: put(out, 71)),
        "mtmlGpuGetTemperature": on("mtmlGpuGetTemperature", 300, lambda gpu, out: put(out, 48)),
    }
    return library(mtml.PROTOTYPES, answers, missing)


def opener(handle: Any) -> Callable[[], mtml.Mtml]:
    """What the Moore Threads detector calls to open MTML, over ``handle`` instead of libmtml.so."""
    return lambda: mtml.Mtml.open(handle)
