"""Our binding of ROCm SMI (`librocm_smi64.so`) as Hygon's DTK ships it (hyhal): the calls detection needs.

Hygon DCUs are ROCm-derived; the DTK (and the standalone hyhal package behind `hy-smi`) ships AMD's ROCm
SMI library, built for the `hydcu` driver, with no Python binding the device manager could afford. The
prototypes, enum values and error codes below are the facts of `rocm_smi.h` (as gpustack-runtime's
pyrocmsmi, which it uses for Hygon too, also declares them); the code is ours and covers only what the
detector reads: the device count, each DCU's name, unique ID, PCI address, VRAM total and use, ECC
counters of the memory controller, busy share and temperature, and the driver version.

ROCm SMI addresses a device by its index (`dv_ind`). Sizes are in bytes, temperatures in millidegrees.
This module is imported only when the bus shows a Hygon card (see ``clib``).
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Mapping
from ctypes import POINTER, Structure, c_char, c_int, c_int64, c_size_t, c_uint32, c_uint64
from typing import Any, Final

from gpustack_operator.device_manager.detector import clib

MAX_DEVICES: Final = 64
NAME_LENGTH: Final = 256

STATUS_NOT_SUPPORTED: Final = 2
STATUS_NOT_YET_IMPLEMENTED: Final = 9
UNSUPPORTED: Final = frozenset({STATUS_NOT_SUPPORTED, STATUS_NOT_YET_IMPLEMENTED, None})
"""Answers that mean "this query does not exist here", not "this card is broken"."""

MEM_TYPE_VRAM: Final = 0
GPU_BLOCK_UMC: Final = 0x1
"""`rsmi_gpu_block_t`: the memory controller, whose ECC counters are the VRAM's."""
TEMP_TYPE_EDGE: Final = 0
TEMP_CURRENT: Final = 0
SW_COMP_DRIVER: Final = 0
MIB: Final = 1 << 20


def library_paths(environ: Mapping[str, str] = os.environ) -> tuple[str, ...]:
    """`$ROCM_SMI_LIB_PATH`, the linker's search path, then where hyhal and the DTK install the library."""
    configured = environ.get("ROCM_SMI_LIB_PATH", "")
    rocm = environ.get("ROCM_PATH") or environ.get("ROCM_HOME") or "/opt/dtk"
    homes = [configured] if configured else []
    homes += [f"{rocm}/lib", f"{rocm}/rocm_smi/lib", "/opt/hyhal/lib", "/opt/dtk/.hyhal/rocm_smi/lib"]
    return ("librocm_smi64.so", *(f"{home}/librocm_smi64.so" for home in dict.fromkeys(homes)))


class ErrorCount(Structure):
    """`rsmi_error_count_t`; newer ROCm releases append `deferred_err`, declared so the buffer is large enough
    for either."""

    _fields_ = (("correctable_err", c_uint64), ("uncorrectable_err", c_uint64), ("deferred_err", c_uint64))


_U32 = ctypes.c_uint32
PROTOTYPES: Final[dict[str, clib.Prototype]] = {
    "rsmi_init": (c_int, (c_uint64,)),
    "rsmi_num_monitor_devices": (c_int, (POINTER(c_uint32),)),
    "rsmi_dev_name_get": (c_int, (_U32, POINTER(c_char), c_size_t)),
    "rsmi_dev_unique_id_get": (c_int, (_U32, POINTER(c_uint64))),
    "rsmi_dev_pci_id_get": (c_int, (_U32, POINTER(c_uint64))),
    "rsmi_dev_memory_total_get": (c_int, (_U32, c_int, POINTER(c_uint64))),
    "rsmi_dev_memory_usage_get": (c_int, (_U32, c_int, POINTER(c_uint64))),
    "rsmi_dev_ecc_count_get": (c_int, (_U32, c_int, POINTER(ErrorCount))),
    "rsmi_dev_busy_percent_get": (c_int, (_U32, POINTER(c_uint32))),
    "rsmi_dev_temp_metric_get": (c_int, (_U32, c_uint32, c_int, POINTER(c_int64))),
    "rsmi_version_str_get": (c_int, (c_int, POINTER(c_char), c_uint32)),
}


def bus_id(bdfid: int) -> str:
    """ROCm SMI's packed BDF ID (domain << 32 | bus << 8 | device << 3 | function) as sysfs spells it."""
    domain, bus, device, function = (
        (bdfid >> 32) & 0xFFFFFFFF,
        (bdfid >> 8) & 0xFF,
        (bdfid >> 3) & 0x1F,
        bdfid & 0x7,
    )
    return f"{domain:04x}:{bus:02x}:{device:02x}.{function:x}"


class RocmSmi(clib.Binding):
    """ROCm SMI's answers as Python values; every failure is ``clib.CallError`` with ROCm SMI's status."""

    PROTOTYPES = PROTOTYPES
    LABEL = "ROCm SMI of the Hygon DTK (librocm_smi64.so)"

    @classmethod
    def library_paths(cls) -> tuple[str, ...]:
        """librocm_smi64.so from the DTK or hyhal."""
        return library_paths()

    def init(self) -> None:
        self._lib.call("rsmi_init", 0)

    def _u64(self, name: str, *args: Any) -> int:
        value = c_uint64()
        self._lib.call(name, *args, ctypes.byref(value))
        return value.value

    def count(self) -> int:
        number = c_uint32()
        self._lib.call("rsmi_num_monitor_devices", ctypes.byref(number))
        if number.value > MAX_DEVICES:
            raise clib.CallError(f"rsmi_num_monitor_devices (count {number.value})", -1)
        return number.value

    def name(self, index: int) -> str:
        return self._lib.text("rsmi_dev_name_get", NAME_LENGTH, index)

    def unique_id(self, index: int) -> str:
        """`GPU-<hex>`, as hy-smi and gpustack-runtime name the DCU; "" when the driver answers 0."""
        value = self._u64("rsmi_dev_unique_id_get", index)
        return f"GPU-{value:x}" if value else ""

    def bus_id(self, index: int) -> str:
        return bus_id(self._u64("rsmi_dev_pci_id_get", index))

    def memory_total_mib(self, index: int) -> int:
        return self._u64("rsmi_dev_memory_total_get", index, MEM_TYPE_VRAM) // MIB

    def memory_used_mib(self, index: int) -> int:
        return self._u64("rsmi_dev_memory_usage_get", index, MEM_TYPE_VRAM) // MIB

    def uncorrectable_ecc(self, index: int) -> int | None:
        """Uncorrectable VRAM ECC errors; None when this driver or card has no ECC counters to read."""
        errors = ErrorCount()
        if not self._lib.offered(
            UNSUPPORTED, "rsmi_dev_ecc_count_get", index, GPU_BLOCK_UMC, ctypes.byref(errors)
        ):
            return None
        return int(errors.uncorrectable_err)

    def busy_percent(self, index: int) -> int:
        return self._lib.uint("rsmi_dev_busy_percent_get", index)

    def temperature(self, index: int) -> int:
        value = c_int64()
        self._lib.call("rsmi_dev_temp_metric_get", index, TEMP_TYPE_EDGE, TEMP_CURRENT, ctypes.byref(value))
        return value.value // 1000

    def driver_version(self) -> str:
        return self._lib.text("rsmi_version_str_get", NAME_LENGTH, SW_COMP_DRIVER)
