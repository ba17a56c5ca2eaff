"""Recorded NVML answers: a stand-in libnvidia-ml.so.1 whose functions are C callables with NVML's prototypes.

The values are what NVML reports on the named products (memory totals in bytes, bus widths in bits,
compute capabilities), so the detector is exercised on the answers real cards give, not on round numbers.
A call a card does not offer answers NVML_ERROR_NOT_SUPPORTED (``UNSUPPORTED`` in a field); only the
calls a card offers are answered from its fields. NVML's
NVML-shaped calls are answered as for IXML and HGML (``recorded_nvmlshape``); this module adds NVIDIA's
own (ECC and MIG modes, bus width, ECC counters, minor number, compute capability), all through ctypes'
real marshalling.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpustack_operator.device_manager.detector import nvml, nvmlshape
from tests.unit.device_manager.recorded_clib import OK, fill, put
from tests.unit.device_manager.recorded_nvmlshape import record

NOT_SUPPORTED = nvmlshape.ERROR_NOT_SUPPORTED
DRIVER_NOT_LOADED = 9
GPU_IS_LOST = 15
UNSUPPORTED = None
"""A field that answers NVML_ERROR_NOT_SUPPORTED."""

_OPTIONAL = {
    "bus_width": "nvmlDeviceGetMemoryBusWidth",
    "ecc": "nvmlDeviceGetEccMode",
    "cores": "nvmlDeviceGetNumGpuCores",
    "mig": "nvmlDeviceGetMigMode",
    "dram_uncorrected": "nvmlDeviceGetMemoryErrorCounter",
    "volatile_uncorrected": "nvmlDeviceGetTotalEccErrors",
}


@dataclass(frozen=True)
class NvmlGpu:
    """One card's recorded NVML answers; ``errors`` maps a function to the code it returns."""

    name: bytes
    uuid: bytes
    bus: int
    memory_bytes: int
    compute_capability: tuple[int, int]
    bus_width: int | None = 0
    ecc: int | None = 0
    cores: int | None = 0
    minor: int = 0
    mig: int | None = 0
    dram_uncorrected: int | None = 0
    volatile_uncorrected: int | None = 0
    used_bytes: int = 0
    utilization: int = 0
    temperature: int = 40
    errors: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for attribute, function in _OPTIONAL.items():
            if getattr(self, attribute) is UNSUPPORTED:
                self.errors.setdefault(function, NOT_SUPPORTED)

    @property
    def bus_id(self) -> str:
        """As NVML spells it: `00000000:18:00.0`."""
        return f"00000000:{self.bus:02X}:00.0"


def _gpu(
    name: bytes, serial: int, bus: int, total: int, capability: tuple[int, int], **facts: Any
) -> NvmlGpu:
    uuid = f"GPU-{serial:08x}-0000-4000-8000-{serial:012d}".encode()
    return NvmlGpu(name, uuid, bus, total, compute_capability=capability, **facts)


H100 = _gpu(b"NVIDIA H100 80GB HBM3", 1, 0x18, 85_520_809_984, (9, 0), bus_width=5120, ecc=1, cores=16896)
A10 = _gpu(b"NVIDIA A10", 2, 0x3B, 24_146_608_128, (8, 6), bus_width=384, ecc=0, cores=9216, minor=1)
L40S_ECC = _gpu(b"NVIDIA L40S", 3, 0x5E, 48_305_799_168, (8, 9), bus_width=384, ecc=1, cores=18176, minor=2)
A100_MIG = _gpu(
    b"NVIDIA A100-SXM4-80GB",
    4,
    0x86,
    85_899_345_920,
    (8, 0),
    bus_width=5120,
    ecc=1,
    cores=6912,
    minor=3,
    mig=1,
)
H100_ECC_ERRORS = _gpu(
    b"NVIDIA H100 80GB HBM3",
    5,
    0xAF,
    85_520_809_984,
    (9, 0),
    bus_width=5120,
    ecc=1,
    cores=16896,
    minor=4,
    dram_uncorrected=2,
)
OLD_DRIVER_GDDR = _gpu(
    b"Tesla T4",
    6,
    0xD8,
    15_843_721_216,
    (7, 5),
    bus_width=UNSUPPORTED,
    ecc=1,
    cores=UNSUPPORTED,
    minor=5,
    mig=UNSUPPORTED,
    dram_uncorrected=UNSUPPORTED,
    volatile_uncorrected=1,
)
"""A Turing card on a driver that answers NOT_SUPPORTED for bus width, cores, MIG and the DRAM counter."""


def record_nvml(
    gpus: Sequence[NvmlGpu],
    *,
    driver: bytes = b"550.54.15",
    cuda: int = 12040,
    init: int = OK,
    count: int | None = None,
    missing: Sequence[str] = (),
) -> Any:
    """A recorded libnvidia-ml.so.1 answering for ``gpus`` in index order (``missing``: what it lacks)."""

    def dram(card: NvmlGpu, kind: int, counter: int, location: int, out: Any) -> int:
        wanted = (nvml.MEMORY_ERROR_UNCORRECTED, nvml.VOLATILE_ECC, nvml.LOCATION_DRAM)
        return put(out, (card.dram_uncorrected or 0) if (kind, counter, location) == wanted else 0)

    def total(card: NvmlGpu, kind: int, counter: int, out: Any) -> int:
        wanted = (nvml.MEMORY_ERROR_UNCORRECTED, nvml.VOLATILE_ECC)
        return put(out, (card.volatile_uncorrected or 0) if (kind, counter) == wanted else 0)

    def capability(card: NvmlGpu, major: Any, minor: Any) -> int:
        put(major, card.compute_capability[0])
        return put(minor, card.compute_capability[1])

    def pair(value: Callable[[NvmlGpu], int | None]) -> Callable[..., int]:
        return lambda card, current, pending: put(current, value(card) or 0) or put(pending, value(card) or 0)

    vendor: dict[str, Callable[..., int]] = {
        "nvmlDeviceGetMinorNumber": lambda card, out: put(out, card.minor),
        "nvmlDeviceGetCudaComputeCapability": capability,
        "nvmlDeviceGetMemoryBusWidth": lambda card, out: put(out, card.bus_width or 0),
        "nvmlDeviceGetEccMode": pair(lambda card: card.ecc),
        "nvmlDeviceGetMigMode": pair(lambda card: card.mig),
        "nvmlDeviceGetMemoryErrorCounter": dram,
        "nvmlDeviceGetTotalEccErrors": total,
        "nvmlDeviceGetUtilizationRates": lambda card, out: fill(out, gpu=card.utilization, memory=0),
        "nvmlDeviceGetTemperature": lambda card, sensor, out: put(out, card.temperature),
    }
    return record(
        nvml.API,
        nvml.PROTOTYPES,
        gpus,
        vendor,
        driver=driver,
        runtime=cuda,
        init=init,
        count=count,
        pci_device_id=0x233010DE,
        missing=missing,
    )


def opener(handle: Any) -> Callable[[], nvml.Nvml]:
    """What the NVIDIA detector calls to open NVML, over ``handle`` instead of libnvidia-ml.so.1."""
    return lambda: nvml.Nvml.open(handle)
