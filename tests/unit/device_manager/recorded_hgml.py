"""Recorded HGML answers: a stand-in for libhgml.so whose functions are C callables with HGML's prototypes.

Each card is a T-Head PPU as HGML describes it: name, UUID, PCI address, cores, the HGGC compute
capability, VRAM in bytes and device-memory ECC counters. No T-Head card or HGML output was available:
names, sizes and version strings have the shape HGML's API gives, not a particular product's or
machine's values. NVML's calls are answered as for every NVML-shaped library (``recorded_nvmlshape``),
through ctypes' real marshalling.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpustack_operator.device_manager.detector import hgml, nvmlshape
from tests.unit.device_manager.recorded import SysfsDevice
from tests.unit.device_manager.recorded_clib import OK, fill, put
from tests.unit.device_manager.recorded_nvmlshape import record

NOT_SUPPORTED = nvmlshape.ERROR_NOT_SUPPORTED
DRIVER_NOT_LOADED = hgml.ERROR_DRIVER_NOT_LOADED
GPU_IS_LOST = hgml.ERROR_GPU_IS_LOST
UNKNOWN = 999
BUSES = [0x0E, 0x2A, 0x4B, 0x6C, 0x8D, 0xAE, 0xCF, 0xE1]


@dataclass(frozen=True)
class RecordedPpu:
    """One card as HGML answers it; ``errors`` maps a function to the code it returns."""

    bus: int
    uuid: bytes
    name: bytes = b"T-Head PPU"
    memory_bytes: int = 96 << 30
    used_bytes: int = 640 << 20
    cores: int = 128
    dram_uncorrected: int = 0
    total_uncorrected: int = 0
    errors: dict[str, int] = field(default_factory=dict)


def ppu(index: int, **changes: Any) -> RecordedPpu:
    values: dict[str, Any] = {
        "bus": BUSES[index],
        "uuid": f"GPU-6d2e9f41-7a3b-4c5d-9e8f-0a1b2c3d4e{index:02d}".encode(),
    }
    values.update(changes)
    return RecordedPpu(**values)


EIGHT_PPUS = [ppu(i) for i in range(8)]
PPU_PCI = [
    SysfsDevice(f"0000:{bus:02x}:00.0", "1ded", "8000", "120000", str(i // 4)) for i, bus in enumerate(BUSES)
]


def record_hgml(
    ppus: Sequence[RecordedPpu],
    *,
    driver: bytes = b"1.5.2",
    hggc: int = 12030,
    init: int = OK,
    count: int | None = None,
    missing: Sequence[str] = (),
) -> Any:
    """A recorded library answering for ``ppus`` in index order (``missing``: functions it lacks)."""

    def dram(card: RecordedPpu, kind: int, counter: int, location: int, out: Any) -> int:
        wanted = (hgml.MEMORY_ERROR_UNCORRECTED, hgml.VOLATILE_ECC, hgml.LOCATION_DRAM)
        return put(out, card.dram_uncorrected if (kind, counter, location) == wanted else 0)

    def total(card: RecordedPpu, kind: int, counter: int, out: Any) -> int:
        wanted = (hgml.MEMORY_ERROR_UNCORRECTED, hgml.VOLATILE_ECC)
        return put(out, card.total_uncorrected if (kind, counter) == wanted else 0)

    vendor: dict[str, Callable[..., int]] = {
        "hgmlDeviceGetMinorNumber": lambda card, out: put(out, 0),
        "hgmlDeviceGetHggcComputeCapability": lambda card, major, minor: put(major, 8) or put(minor, 0),
        "hgmlDeviceGetMemoryErrorCounter": dram,
        "hgmlDeviceGetTotalEccErrors": total,
        "hgmlDeviceGetUtilizationRates": lambda card, out: fill(out, gpu=47, memory=12),
        "hgmlDeviceGetTemperature": lambda card, sensor, out: put(out, 44),
    }
    return record(
        hgml.API,
        hgml.PROTOTYPES,
        ppus,
        vendor,
        driver=driver,
        runtime=hggc,
        init=init,
        count=count,
        pci_device_id=0x80001DED,
        missing=missing,
    )


def opener(handle: Any) -> Callable[[], hgml.Hgml]:
    """What the T-Head detector calls to open HGML, over ``handle`` instead of libhgml.so."""
    return lambda: hgml.Hgml.open(handle)
