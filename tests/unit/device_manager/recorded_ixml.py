"""Recorded IXML answers: a stand-in for libixml.so whose functions are C callables with IXML's prototypes.

Each card is an Iluvatar BI-V100 (32 GiB, IXML answers bytes) as IXML describes it: its name, a UUID,
the minor number of `/dev/iluvatarN`, the PCI address, GPU cores and the health bit set. UUID and version
strings have the shape IXML gives, not a particular machine's values. A card's handle is its index + 1
(the library's handles are opaque pointers, never NULL). The answers pass through ctypes' real
marshalling (``clib.recorded_function``), so our layouts, pointer passing and code checks run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpustack_operator.device_manager.detector import ixml
from tests.unit.device_manager.recorded import SysfsDevice
from tests.unit.device_manager.recorded_clib import OK, fill, library, put, put_text

UNKNOWN = 999
NOT_SUPPORTED = ixml.ERROR_NOT_SUPPORTED
GPU_IS_LOST = 15
INVALID_ARGUMENT = 2
BUSES = [0x1B, 0x3E, 0x5F, 0x86, 0xAF, 0xD8]
HEALTH_ECC_ERROR = 0x10


@dataclass(frozen=True)
class RecordedGpu:
    """One card as IXML answers it; ``errors`` maps a function to the code it returns."""

    bus: int
    uuid: bytes
    minor: int
    name: bytes = b"Iluvatar BI-V100"
    memory_bytes: int = 32 << 30
    used_bytes: int = 116 << 20
    cores: int = 4096
    health: int = 0
    errors: dict[str, int] = field(default_factory=dict)


def bi_v100(index: int, **changes: Any) -> RecordedGpu:
    values: dict[str, Any] = {
        "bus": BUSES[index],
        "uuid": f"GPU-4b3d7c1e-0a2f-5e9b-8c6d-2f1a3b4c5d{index:02d}".encode(),
        "minor": index,
    }
    values.update(changes)
    return RecordedGpu(**values)


SIX_BI_V100 = [bi_v100(i) for i in range(6)]
BI_V100_PCI = [
    SysfsDevice(f"0000:{bus:02x}:00.0", "1e3e", "0001", "030200", str(i // 3)) for i, bus in enumerate(BUSES)
]


def record_ixml(
    gpus: Sequence[RecordedGpu],
    *,
    driver: bytes = b"4.1.0",
    cuda: int = 10020,
    init: int = OK,
    count: int | None = None,
    missing: Sequence[str] = (),
) -> Any:
    """A recorded library answering for ``gpus`` in index order (``missing``: functions it lacks)."""

    def on(name: str, answer: Callable[..., int]) -> Callable[..., int]:
        def call(handle: int | None, *rest: Any) -> int:
            if handle is None or not 1 <= handle <= len(gpus):
                return INVALID_ARGUMENT
            gpu = gpus[handle - 1]
            code = gpu.errors.get(name, OK)
            return code if code != OK else answer(gpu, *rest)

        return call

    def handle_by_index(index: int, out: Any) -> int:
        if not 0 <= index < len(gpus):
            return INVALID_ARGUMENT
        code = gpus[index].errors.get("nvmlDeviceGetHandleByIndex_v2", OK)
        return code if code != OK else put(out, index + 1)

    def memory_v2(gpu: RecordedGpu, out: Any) -> int:
        if out.contents.version != ixml.MEMORY_V2:
            return 25  # NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        free = gpu.memory_bytes - gpu.used_bytes
        return fill(out, total=gpu.memory_bytes, used=gpu.used_bytes, free=free, reserved=0)

    def pci(gpu: RecordedGpu, out: Any) -> int:
        bus_id = f"00000000:{gpu.bus:02X}:00.0".encode()
        return fill(out, busId=bus_id, busIdLegacy=bus_id[4:], domain=0, bus=gpu.bus, pciDeviceId=0x00011E3E)

    answers: dict[str, Callable[..., int]] = {
        "nvmlInitWithFlags": lambda flags: init,
        "nvmlSystemGetDriverVersion": lambda out, length: put_text(out, length, driver),
        "nvmlSystemGetCudaDriverVersion": lambda out: put(out, cuda),
        "nvmlDeviceGetCount_v2": lambda out: put(out, len(gpus) if count is None else count),
        "nvmlDeviceGetHandleByIndex_v2": handle_by_index,
        "nvmlDeviceGetName": on(
            "nvmlDeviceGetName", lambda gpu, out, length: put_text(out, length, gpu.name)
        ),
        "nvmlDeviceGetUUID": on(
            "nvmlDeviceGetUUID", lambda gpu, out, length: put_text(out, length, gpu.uuid)
        ),
        "nvmlDeviceGetMinorNumber": on("nvmlDeviceGetMinorNumber", lambda gpu, out: put(out, gpu.minor)),
        "nvmlDeviceGetNumGpuCores": on("nvmlDeviceGetNumGpuCores", lambda gpu, out: put(out, gpu.cores)),
        "nvmlDeviceGetCudaComputeCapability": on(
            "nvmlDeviceGetCudaComputeCapability", lambda gpu, major, minor: put(major, 7) or put(minor, 0)
        ),
        "nvmlDeviceGetMemoryInfo_v2": on("nvmlDeviceGetMemoryInfo_v2", memory_v2),
        "nvmlDeviceGetMemoryInfo": on(
            "nvmlDeviceGetMemoryInfo",
            lambda gpu, out: fill(out, total=gpu.memory_bytes, used=gpu.used_bytes, free=0),
        ),
        "nvmlDeviceGetPciInfo_v3": on("nvmlDeviceGetPciInfo_v3", pci),
        "ixmlDeviceGetHealth": on("ixmlDeviceGetHealth", lambda gpu, out: put(out, gpu.health)),
        "nvmlDeviceGetUtilizationRates": on(
            "nvmlDeviceGetUtilizationRates", lambda gpu, out: fill(out, gpu=63, memory=20)
        ),
        "nvmlDeviceGetTemperature": on("nvmlDeviceGetTemperature", lambda gpu, sensor, out: put(out, 52)),
    }
    return library(ixml.PROTOTYPES, answers, missing)


def opener(handle: Any) -> Callable[[], ixml.Ixml]:
    """What the Iluvatar detector calls to open IXML, over ``handle`` instead of libixml.so."""
    return lambda: ixml.Ixml.open(handle)
