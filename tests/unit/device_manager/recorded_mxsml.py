"""Recorded MXSML answers: a stand-in for libmxsml.so whose functions are C callables with MXSML's prototypes.

Each card is a MetaX C500 (64 GiB HBM, MXSML answers VRAM in KiB) as MXSML describes it: name `MXC500`,
a UUID, a `0000:xx:00.0` bus address and the virtualisation mode. UUID, driver and MACA version strings
have the shape MXSML gives, not a particular machine's values. The answers pass through ctypes' real
marshalling (``clib.recorded_function``), so our layouts, pointer passing and code checks run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpustack_operator.device_manager.detector import mxsml
from tests.unit.device_manager.recorded import SysfsDevice
from tests.unit.device_manager.recorded_clib import OK, fill, library, put, put_text

FAILURE = 1
NOT_SUPPORT = mxsml.ERROR_OPERATION_NOT_SUPPORT
INVALID_DEVICE_ID = 6
BUSES = [0x0F, 0x34, 0x48, 0x5A, 0x87, 0xAE, 0xC2, 0xD7]


@dataclass(frozen=True)
class RecordedGpu:
    """One card as MXSML answers it; ``errors`` maps a function to the code it returns."""

    bus: int
    uuid: bytes
    name: bytes = b"MXC500"
    vram_kib: int = 64 * 1024 * 1024
    vram_used_kib: int = 858 * 1024
    dram_ue: int = 0
    mode: int = 0
    errors: dict[str, int] = field(default_factory=dict)


def c500(index: int, **changes: Any) -> RecordedGpu:
    values: dict[str, Any] = {
        "bus": BUSES[index],
        "uuid": f"GPU-6b1e0c3a-52d4-4f7e-9a1c-0{index}4e7d2b3f61".encode(),
    }
    values.update(changes)
    return RecordedGpu(**values)


EIGHT_C500 = [c500(i) for i in range(8)]
C500_PCI = [
    SysfsDevice(f"0000:{bus:02x}:00.0", "9999", "4081", "038000", str(i // 4)) for i, bus in enumerate(BUSES)
]


def record_mxsml(
    gpus: Sequence[RecordedGpu],
    *,
    maca: bytes = b"2.32.0.6",
    driver: bytes = b"2.14.6",
    init: int = OK,
    count: int | None = None,
    missing: Sequence[str] = (),
) -> Any:
    """A recorded library answering for ``gpus`` in index order (``missing``: functions it lacks)."""

    def on(name: str, answer: Callable[..., int]) -> Callable[..., int]:
        def call(index: int, *rest: Any) -> int:
            if not 0 <= index < len(gpus):
                return INVALID_DEVICE_ID
            gpu = gpus[index]
            code = gpu.errors.get(name, OK)
            return code if code != OK else answer(gpu, *rest)

        return call

    def info(gpu: RecordedGpu, out: Any) -> int:
        bdf = f"0000:{gpu.bus:02x}:00.0".encode()
        return fill(
            out, deviceId=0x4081, bdfId=bdf, uuid=gpu.uuid, mode=gpu.mode, deviceName=gpu.name, brand=2
        )

    answers: dict[str, Callable[..., int]] = {
        "mxSmlInit": lambda: init,
        "mxSmlGetDeviceCount": lambda: len(gpus) if count is None else count,
        "mxSmlGetMacaVersion": lambda out, size: put_text(out, size[0], maca),
        "mxSmlGetDeviceVersion": on(
            "mxSmlGetDeviceVersion", lambda gpu, unit, out, size: put_text(out, size[0], driver)
        ),
        "mxSmlGetDeviceInfo": on("mxSmlGetDeviceInfo", info),
        "mxSmlGetMemoryInfo": on(
            "mxSmlGetMemoryInfo",
            lambda gpu, out: fill(
                out, vramTotal=gpu.vram_kib, vramUse=gpu.vram_used_kib, visVramTotal=gpu.vram_kib
            ),
        ),
        "mxSmlGetTotalEccErrors": on(
            "mxSmlGetTotalEccErrors", lambda gpu, out: fill(out, dramUE=gpu.dram_ue, dramCE=3)
        ),
        "mxSmlGetDeviceIpUsage": on("mxSmlGetDeviceIpUsage", lambda gpu, ip, out: put(out, 42)),
        "mxSmlGetTemperatureInfo": on("mxSmlGetTemperatureInfo", lambda gpu, sensor, out: put(out, 4650)),
    }
    return library(mxsml.PROTOTYPES, answers, missing)


def opener(handle: Any) -> Callable[[], mxsml.Mxsml]:
    """What the MetaX detector calls to open MXSML, over ``handle`` instead of libmxsml.so."""
    return lambda: mxsml.Mxsml.open(handle)
