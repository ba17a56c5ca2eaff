"""Recorded IXML answers: a stand-in for libixml.so whose functions are C callables with IXML's prototypes.

Each card is an Iluvatar BI-V100 (32 GiB, IXML answers bytes) as IXML describes it: its name, a UUID,
the minor number of `/dev/iluvatarN`, the PCI address, GPU cores and the health bit set. UUID and version
strings have the shape IXML gives, not a particular machine's values. NVML's calls are answered as for
every NVML-shaped library (``recorded_nvmlshape``), so our layouts, pointer passing and code checks run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpustack_operator.device_manager.detector import ixml
from tests.unit.device_manager.recorded import SysfsDevice
from tests.unit.device_manager.recorded_clib import OK, fill, put
from tests.unit.device_manager.recorded_nvmlshape import record

UNKNOWN = 999
NOT_SUPPORTED = ixml.ERROR_NOT_SUPPORTED
GPU_IS_LOST = 15
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
    vendor: dict[str, Callable[..., int]] = {
        "nvmlDeviceGetMinorNumber": lambda gpu, out: put(out, gpu.minor),
        "nvmlDeviceGetCudaComputeCapability": lambda gpu, major, minor: put(major, 7) or put(minor, 0),
        "ixmlDeviceGetHealth": lambda gpu, out: put(out, gpu.health),
        "nvmlDeviceGetUtilizationRates": lambda gpu, out: fill(out, gpu=63, memory=20),
        "nvmlDeviceGetTemperature": lambda gpu, sensor, out: put(out, 52),
    }
    return record(
        ixml.API,
        ixml.PROTOTYPES,
        gpus,
        vendor,
        driver=driver,
        runtime=cuda,
        init=init,
        count=count,
        pci_device_id=0x00011E3E,
        missing=missing,
    )


def opener(handle: Any) -> Callable[[], ixml.Ixml]:
    """What the Iluvatar detector calls to open IXML, over ``handle`` instead of libixml.so."""
    return lambda: ixml.Ixml.open(handle)
