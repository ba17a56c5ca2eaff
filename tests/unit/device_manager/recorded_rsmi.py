"""Recorded ROCm SMI answers (as the Hygon DTK ships the library) and the sysfs a DCU node shows.

The stand-in's functions are C callables with ROCm SMI's prototypes (``clib.recorded_function``), so our
argument types, packed BDF decoding, byte-to-MiB conversion and status checks run as they do against the
library. The values have the shape a K100_AI node gives (64 GiB of VRAM in bytes, a 64-bit unique ID,
KFD topology with 4 SIMDs per CU), not a capture from real hardware.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from gpustack_operator.device_manager.detector import clib, rsmi
from tests.unit.device_manager.recorded import SysfsDevice, build_sysfs

OK = 0
INVALID_ARGS = 1
NOT_SUPPORTED = rsmi.STATUS_NOT_SUPPORTED
FILE_ERROR = 3
BUSES = [0x0A, 0x2A, 0x4A, 0x6A]
GIB = 1 << 30


@dataclass(frozen=True)
class RecordedDcu:
    """One DCU as ROCm SMI answers it; ``errors`` maps a function to the status it returns."""

    index: int
    name: bytes = b"K100_AI"
    unique_id: int = 0
    vram_bytes: int = 64 * GIB
    vram_used_bytes: int = 1536 * (1 << 20)
    uncorrectable: int = 0
    bus: int = 0x0A
    simds: int = 480
    drm_minor: int = 1
    errors: dict[str, int] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return f"0000:{self.bus:02x}:00.0"


def k100(index: int, **changes: Any) -> RecordedDcu:
    values: dict[str, Any] = {
        "index": index,
        "unique_id": 0x5C3A1B2D00000000 + index,
        "bus": BUSES[index],
        "drm_minor": index + 1,
    }
    values.update(changes)
    return RecordedDcu(**values)


K100_NODE = [k100(i) for i in range(4)]


def dcu_sysfs(root: Path, dcus: Sequence[RecordedDcu]) -> Path:
    """The bus (vendor 1d94), each card's `drm/cardN`, and the KFD topology (node 0 the CPU)."""
    devices = [
        SysfsDevice(dcu.address, "1d94", "6320", "120000", str(i // 2), "0-63", f"0000:{dcu.bus - 1:02x}")
        for i, dcu in enumerate(dcus)
    ]
    build_sysfs(root, devices)
    nodes = root / "class/kfd/kfd/topology/nodes"
    (nodes / "0").mkdir(parents=True)
    (nodes / "0/properties").write_text("cpu_cores_count 64\nsimd_count 0\nlocation_id 0\ndomain 0\n")
    for i, dcu in enumerate(dcus, start=1):
        (root / "bus/pci/devices" / dcu.address / "drm" / f"card{dcu.drm_minor}").mkdir(parents=True)
        (root / "bus/pci/devices" / dcu.address / "drm" / f"renderD{127 + dcu.drm_minor}").mkdir()
        (nodes / str(i)).mkdir()
        (nodes / str(i) / "properties").write_text(
            f"cpu_cores_count 0\nsimd_count {dcu.simds}\nsimd_per_cu 4\n"
            f"location_id {dcu.bus << 8}\ndomain 0\n"
        )
    return root


def record_rsmi(
    dcus: Sequence[RecordedDcu],
    *,
    init: int = OK,
    count: int | None = None,
    driver: bytes = b"6.3.8-V1.6.0",
    missing: Sequence[str] = (),
) -> Any:
    """A recorded library answering for ``dcus`` (``missing``: functions it does not export)."""
    by_index = {dcu.index: dcu for dcu in dcus}

    def on(name: str, answer: Callable[..., None]) -> Callable[..., int]:
        def call(index: int, *rest: Any) -> int:
            dcu = by_index.get(index)
            if dcu is None:
                return INVALID_ARGS
            code = dcu.errors.get(name, OK)
            if code == OK:
                answer(dcu, *rest)
            return code

        return call

    def put(value: Callable[[RecordedDcu], int]) -> Callable[..., None]:
        def answer(dcu: RecordedDcu, *rest: Any) -> None:
            rest[-1][0] = value(dcu)

        return answer

    def text(buffer: Any, length: int, value: bytes) -> None:
        ctypes.memmove(buffer, value + b"\0", min(length, len(value) + 1))

    def device_count(out: Any) -> int:
        out[0] = len(dcus) if count is None else count
        return OK

    def ecc(dcu: RecordedDcu, block: int, out: Any) -> None:
        out.contents.uncorrectable_err = dcu.uncorrectable if block == rsmi.GPU_BLOCK_UMC else 0
        out.contents.correctable_err = 12

    def version(component: int, buffer: Any, length: int) -> int:
        text(buffer, length, driver)
        return OK

    answers: dict[str, Callable[..., int]] = {
        "rsmi_init": lambda flags: init,
        "rsmi_num_monitor_devices": device_count,
        "rsmi_dev_name_get": on(
            "rsmi_dev_name_get", lambda dcu, buffer, length: text(buffer, length, dcu.name)
        ),
        "rsmi_dev_unique_id_get": on("rsmi_dev_unique_id_get", put(lambda dcu: dcu.unique_id)),
        "rsmi_dev_pci_id_get": on("rsmi_dev_pci_id_get", put(lambda dcu: dcu.bus << 8)),
        "rsmi_dev_memory_total_get": on("rsmi_dev_memory_total_get", put(lambda dcu: dcu.vram_bytes)),
        "rsmi_dev_memory_usage_get": on("rsmi_dev_memory_usage_get", put(lambda dcu: dcu.vram_used_bytes)),
        "rsmi_dev_ecc_count_get": on("rsmi_dev_ecc_count_get", ecc),
        "rsmi_dev_busy_percent_get": on("rsmi_dev_busy_percent_get", put(lambda dcu: 63)),
        "rsmi_dev_temp_metric_get": on("rsmi_dev_temp_metric_get", put(lambda dcu: 52_000)),
        "rsmi_version_str_get": version,
    }
    return SimpleNamespace(
        **{
            name: clib.recorded_function(rsmi.PROTOTYPES[name], answer)
            for name, answer in answers.items()
            if name not in missing
        }
    )


def opener(handle: Any) -> Callable[[], rsmi.RocmSmi]:
    """What the Hygon detector calls to open ROCm SMI, over ``handle`` instead of librocm_smi64.so."""
    return lambda: rsmi.RocmSmi.open(handle)
