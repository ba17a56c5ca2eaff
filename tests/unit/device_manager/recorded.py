"""Recorded hardware answers: NVML replies per card (patched onto the real pynvml module) and sysfs trees.

The values are what NVML and sysfs report on the named products (memory totals in bytes, bus widths in
bits, compute capabilities), so the detectors are exercised on the answers real cards give, not on
round numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

UNSUPPORTED = None
"""A recorded answer of NVML_ERROR_NOT_SUPPORTED."""


@dataclass(frozen=True)
class NvmlGpu:
    """One card's recorded NVML replies (None = the call answers NOT_SUPPORTED)."""

    name: str
    uuid: str
    bus_id: str
    total_bytes: int
    bus_width: int | None
    ecc: int | None
    compute_capability: tuple[int, int]
    cores: int | None
    minor: int = 0
    mig: int | None = 0
    dram_uncorrected: int | None = 0
    volatile_uncorrected: int | None = 0
    used_bytes: int = 0
    utilization: int = 0
    temperature: int = 40


H100 = NvmlGpu(
    "NVIDIA H100 80GB HBM3",
    "GPU-9d4a2b1c-0000-4000-8000-000000000001",
    "00000000:18:00.0",
    85_520_809_984,
    5120,
    1,
    (9, 0),
    16896,
)
A10 = NvmlGpu(
    "NVIDIA A10",
    "GPU-3f2e1d0c-0000-4000-8000-000000000002",
    "00000000:3B:00.0",
    24_146_608_128,
    384,
    0,
    (8, 6),
    9216,
    minor=1,
)
L40S_ECC = NvmlGpu(
    "NVIDIA L40S",
    "GPU-5a6b7c8d-0000-4000-8000-000000000003",
    "00000000:5E:00.0",
    48_305_799_168,
    384,
    1,
    (8, 9),
    18176,
    minor=2,
)
A100_MIG = NvmlGpu(
    "NVIDIA A100-SXM4-80GB",
    "GPU-1b2c3d4e-0000-4000-8000-000000000004",
    "00000000:86:00.0",
    85_899_345_920,
    5120,
    1,
    (8, 0),
    6912,
    minor=3,
    mig=1,
)
H100_ECC_ERRORS = NvmlGpu(
    "NVIDIA H100 80GB HBM3",
    "GPU-7e8f9a0b-0000-4000-8000-000000000005",
    "00000000:AF:00.0",
    85_520_809_984,
    5120,
    1,
    (9, 0),
    16896,
    minor=4,
    dram_uncorrected=2,
)
OLD_DRIVER_GDDR = NvmlGpu(
    "Tesla T4",
    "GPU-2c3d4e5f-0000-4000-8000-000000000006",
    "00000000:D8:00.0",
    15_843_721_216,
    UNSUPPORTED,
    1,
    (7, 5),
    UNSUPPORTED,
    minor=5,
    mig=UNSUPPORTED,
    dram_uncorrected=UNSUPPORTED,
    volatile_uncorrected=1,
)


def _answer(value: Any) -> Any:
    if value is None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
    return value


def record_nvml(
    monkeypatch: pytest.MonkeyPatch,
    gpus: Sequence[NvmlGpu],
    *,
    driver: str = "550.54.15",
    cuda: int = 12040,
    init_error: int | None = None,
) -> Any:
    """Patch pynvml's functions to give ``gpus``' recorded answers (handles are card indexes)."""

    def init() -> None:
        if init_error is not None:
            raise pynvml.NVMLError(init_error)

    def gpu(handle: int) -> NvmlGpu:
        return gpus[handle]

    answers = {
        "nvmlInit": init,
        "nvmlShutdown": lambda: None,
        "nvmlSystemGetDriverVersion": lambda: driver,
        "nvmlSystemGetCudaDriverVersion": lambda: cuda,
        "nvmlDeviceGetCount": lambda: len(gpus),
        "nvmlDeviceGetHandleByIndex": lambda i: i,
        "nvmlDeviceGetName": lambda h: gpu(h).name,
        "nvmlDeviceGetUUID": lambda h: gpu(h).uuid,
        "nvmlDeviceGetPciInfo": lambda h: SimpleNamespace(busId=gpu(h).bus_id.encode()),
        "nvmlDeviceGetMemoryInfo": lambda h: SimpleNamespace(
            total=gpu(h).total_bytes, used=gpu(h).used_bytes, free=gpu(h).total_bytes - gpu(h).used_bytes
        ),
        "nvmlDeviceGetMemoryBusWidth": lambda h: _answer(gpu(h).bus_width),
        "nvmlDeviceGetEccMode": lambda h: [_answer(gpu(h).ecc), gpu(h).ecc],
        "nvmlDeviceGetMemoryErrorCounter": lambda h, kind, counter, where: _answer(gpu(h).dram_uncorrected),
        "nvmlDeviceGetTotalEccErrors": lambda h, kind, counter: _answer(gpu(h).volatile_uncorrected),
        "nvmlDeviceGetCudaComputeCapability": lambda h: gpu(h).compute_capability,
        "nvmlDeviceGetNumGpuCores": lambda h: _answer(gpu(h).cores),
        "nvmlDeviceGetMinorNumber": lambda h: gpu(h).minor,
        "nvmlDeviceGetMigMode": lambda h: [_answer(gpu(h).mig), gpu(h).mig],
        "nvmlDeviceGetUtilizationRates": lambda h: SimpleNamespace(gpu=gpu(h).utilization, memory=0),
        "nvmlDeviceGetTemperature": lambda h, sensor: gpu(h).temperature,
    }
    for name, answer in answers.items():
        monkeypatch.setattr(pynvml, name, answer)
    return pynvml


@dataclass(frozen=True)
class SysfsDevice:
    """One PCI function as /sys/bus/pci/devices/<address> shows it."""

    address: str
    vendor: str
    device: str
    pci_class: str
    numa_node: str = "0"
    cpulist: str = "0-47,96-143"
    bridge: str = "0000:17"


def build_sysfs(root: Path, devices: Iterable[SysfsDevice]) -> Path:
    """A sysfs tree under ``root`` whose bus/pci/devices entries link into devices/pci<bridge>/..."""
    listing = root / "bus" / "pci" / "devices"
    listing.mkdir(parents=True, exist_ok=True)
    for dev in devices:
        real = root / "devices" / f"pci{dev.bridge}" / f"{dev.bridge}:00.0" / dev.address
        real.mkdir(parents=True)
        for name, value in {
            "vendor": f"0x{dev.vendor}",
            "device": f"0x{dev.device}",
            "class": f"0x{dev.pci_class}",
            "numa_node": dev.numa_node,
            "local_cpulist": dev.cpulist,
        }.items():
            (real / name).write_text(value + "\n")
        (listing / dev.address).symlink_to(real)
    return root
