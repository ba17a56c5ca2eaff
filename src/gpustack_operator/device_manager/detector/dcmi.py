"""Our binding of Huawei's DCMI (`libdcmi.so`, shipped with the Ascend NPU driver): the calls detection needs.

Huawei publishes DCMI as a C library and header only. The prototypes, structure layouts and error codes
below are the facts of `dcmi_interface_api.h` (as gpustack-runtime's pydcmi and Huawei's mind-cluster
device plugin also declare them); the code is ours and covers only what the detector reads: the card
list, each NPU's chip name and AI-core count, its memory (HBM, or DDR on cards without HBM), health and
ECC counters, logic and physical IDs, SoC die ID (our UUID), PCI address, and the driver version.

DCMI addresses an NPU by (card ID, device ID in card): a card can carry several chips plus an MCU. This
module is imported only when the bus shows an Ascend card (see ``clib``).
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, Structure, c_char, c_int, c_uint, c_ulong, c_ulonglong
from dataclasses import dataclass
from typing import Final

from gpustack_operator.device_manager.detector import clib

LIBRARY_PATHS: Final = (
    "libdcmi.so",
    "/usr/local/Ascend/driver/lib64/driver/libdcmi.so",
    "/usr/local/dcmi/libdcmi.so",
)
"""The linker's search path, then where the Ascend driver and the standalone DCMI package install it."""

MAX_CARDS: Final = 64
NAME_LENGTH: Final = 32
VERSION_LENGTH: Final = 64

ERROR_NOT_SUPPORT_IN_CONTAINER: Final = -8013
ERROR_NOT_SUPPORT: Final = -8255
UNSUPPORTED: Final = frozenset({ERROR_NOT_SUPPORT, ERROR_NOT_SUPPORT_IN_CONTAINER, None})
"""Answers that mean "this query does not exist here", not "this card is broken"."""

UNIT_TYPE_NPU: Final = 0
"""`dcmi_unit_type`: a card's devices are NPUs (0), MCUs (1) or CPUs (2)."""
MEMORY_DDR: Final = 0
MEMORY_HBM: Final = 2
DIE_VDIE: Final = 1
INPUT_AICORE: Final = 2
"""`dcmi_get_device_utilization_rate` input type of the AI cores."""


class ChipInfo(Structure):
    _fields_ = (
        ("chip_type", c_char * NAME_LENGTH),
        ("chip_name", c_char * NAME_LENGTH),
        ("chip_ver", c_char * NAME_LENGTH),
        ("aicore_cnt", c_uint),
    )


class HbmInfo(Structure):
    _fields_ = (
        ("memory_size", c_ulonglong),
        ("freq", c_uint),
        ("memory_usage", c_ulonglong),
        ("temp", c_int),
        ("bandwith_util_rate", c_uint),
    )


class MemoryInfo(Structure):
    """`dcmi_get_memory_info_stru` of `dcmi_get_device_memory_info_v3` (MiB)."""

    _fields_ = (
        ("memory_size", c_ulonglong),
        ("memory_available", c_ulonglong),
        ("freq", c_uint),
        ("hugepagesize", c_ulong),
        ("hugepages_total", c_ulong),
        ("hugepages_free", c_ulong),
        ("utiliza", c_uint),
        ("reserve", c_char * 60),
    )


class EccInfo(Structure):
    _fields_ = (
        ("enable_flag", c_int),
        ("single_bit_error_cnt", c_uint),
        ("double_bit_error_cnt", c_uint),
        ("total_single_bit_error_cnt", c_uint),
        ("total_double_bit_error_cnt", c_uint),
        ("single_bit_isolated_pages_cnt", c_uint),
        ("double_bit_isolated_pages_cnt", c_uint),
        ("single_bit_next_isolated_pages_cnt", c_uint),
        ("double_bit_next_isolated_pages_cnt", c_uint),
    )


class DieId(Structure):
    _fields_ = (("soc_die", c_uint * 5),)


class PcieInfo(Structure):
    """`dcmi_pcie_info_all` of `dcmi_get_device_pcie_info_v2` (the V1 struct has no domain)."""

    _fields_ = (
        ("venderid", c_uint),
        ("subvenderid", c_uint),
        ("deviceid", c_uint),
        ("subdeviceid", c_uint),
        ("domain", c_int),
        ("bdf_busid", c_uint),
        ("bdf_deviceid", c_uint),
        ("bdf_funcid", c_uint),
        ("reserve", c_char * 32),
    )


_IDS = (c_int, c_int)
PROTOTYPES: Final[dict[str, clib.Prototype]] = {
    "dcmi_init": (c_int, ()),
    "dcmi_get_card_list": (c_int, (POINTER(c_int), POINTER(c_int), c_int)),
    "dcmi_get_device_num_in_card": (c_int, (c_int, POINTER(c_int))),
    "dcmi_get_device_type": (c_int, (*_IDS, POINTER(c_uint))),
    "dcmi_get_device_chip_info": (c_int, (*_IDS, POINTER(ChipInfo))),
    "dcmi_get_device_hbm_info": (c_int, (*_IDS, POINTER(HbmInfo))),
    "dcmi_get_device_memory_info_v3": (c_int, (*_IDS, POINTER(MemoryInfo))),
    "dcmi_get_device_health": (c_int, (*_IDS, POINTER(c_uint))),
    "dcmi_get_device_ecc_info": (c_int, (*_IDS, c_int, POINTER(EccInfo))),
    "dcmi_get_device_logic_id": (c_int, (POINTER(c_uint), *_IDS)),
    "dcmi_get_device_phyid_from_logicid": (c_int, (c_uint, POINTER(c_uint))),
    "dcmi_get_device_die_v2": (c_int, (*_IDS, c_int, POINTER(DieId))),
    "dcmi_get_device_die": (c_int, (*_IDS, POINTER(DieId))),
    "dcmi_get_device_pcie_info_v2": (c_int, (*_IDS, POINTER(PcieInfo))),
    "dcmi_get_driver_version": (c_int, (POINTER(c_char), c_uint)),
    "dcmi_get_device_utilization_rate": (c_int, (*_IDS, c_int, POINTER(c_uint))),
    "dcmi_get_device_temperature": (c_int, (*_IDS, POINTER(c_int))),
}


@dataclass(frozen=True)
class Memory:
    total_mib: int
    used_mib: int


class Dcmi(clib.Binding):
    """DCMI's answers as Python values; every failure is ``clib.CallError`` with DCMI's code."""

    PROTOTYPES = PROTOTYPES
    LABEL = "Ascend DCMI (libdcmi.so)"

    @classmethod
    def library_paths(cls) -> tuple[str, ...]:
        return LIBRARY_PATHS

    def init(self) -> None:
        self._lib.call("dcmi_init")

    def devices(self) -> list[tuple[int, int]]:
        """(card ID, device ID) of every device of every card, MCUs and CPUs included."""
        count, cards = c_int(), (c_int * MAX_CARDS)()
        self._lib.call("dcmi_get_card_list", ctypes.byref(count), cards, MAX_CARDS)
        if not 0 <= count.value <= MAX_CARDS:
            raise clib.CallError(f"dcmi_get_card_list (count {count.value})", -1)
        found = []
        for card in cards[: count.value]:
            number = c_int()
            self._lib.call("dcmi_get_device_num_in_card", card, ctypes.byref(number))
            found += [(card, device) for device in range(max(0, min(number.value, MAX_CARDS)))]
        return found

    def is_npu(self, card: int, device: int) -> bool:
        """False for a card's MCU or CPU; True for an NPU, and when the type cannot be read."""
        try:
            return self._lib.uint("dcmi_get_device_type", card, device) == UNIT_TYPE_NPU
        except clib.CallError:
            return True

    def chip(self, card: int, device: int) -> tuple[str, str, int]:
        """(chip type `Ascend`, chip name `910B3`, AI cores)."""
        info = ChipInfo()
        self._lib.call("dcmi_get_device_chip_info", card, device, ctypes.byref(info))
        return clib.text(info.chip_type), clib.text(info.chip_name), int(info.aicore_cnt)

    def memory(self, card: int, device: int) -> Memory:
        """HBM size and use; cards without HBM (310P) answer the DDR call instead."""
        try:
            hbm = HbmInfo()
            self._lib.call("dcmi_get_device_hbm_info", card, device, ctypes.byref(hbm))
            if hbm.memory_size > 0:
                return Memory(int(hbm.memory_size), int(hbm.memory_usage))
        except clib.CallError as exc:
            if exc.code not in UNSUPPORTED:
                raise
        ddr = MemoryInfo()
        self._lib.call("dcmi_get_device_memory_info_v3", card, device, ctypes.byref(ddr))
        return Memory(int(ddr.memory_size), int(ddr.memory_size) - int(ddr.memory_available))

    def health(self, card: int, device: int) -> int | None:
        """0 OK, 1 minor alarm, 2 major alarm, 3 critical alarm (npu-smi's Health column); None when
        this driver or container cannot answer the query at all. Any other failure is CallError."""
        state = c_uint()
        if not self._lib.offered(UNSUPPORTED, "dcmi_get_device_health", card, device, ctypes.byref(state)):
            return None
        return state.value

    def uncorrectable_ecc(self, card: int, device: int) -> int:
        """Double-bit (uncorrectable) ECC errors of HBM and DDR where ECC is on and readable."""
        errors = 0
        for memory_type in (MEMORY_HBM, MEMORY_DDR):
            info = EccInfo()
            try:
                self._lib.call("dcmi_get_device_ecc_info", card, device, memory_type, ctypes.byref(info))
            except clib.CallError:
                continue
            errors += int(info.double_bit_error_cnt) if info.enable_flag else 0
        return errors

    def logic_id(self, card: int, device: int) -> int:
        value = c_uint()  # the one DCMI call that takes its answer first
        self._lib.call("dcmi_get_device_logic_id", ctypes.byref(value), card, device)
        return value.value

    def physical_id(self, logic_id: int) -> int:
        """The number of the NPU's `/dev/davinciN` node."""
        return self._lib.uint("dcmi_get_device_phyid_from_logicid", logic_id)

    def die(self, card: int, device: int) -> str:
        """The SoC die ID (`8C1A2B3D-...`, five words), stable for the chip's life."""
        die = DieId()
        try:
            self._lib.call("dcmi_get_device_die_v2", card, device, DIE_VDIE, ctypes.byref(die))
        except clib.CallError:
            self._lib.call("dcmi_get_device_die", card, device, ctypes.byref(die))
        return "-".join(f"{word:08X}" for word in die.soc_die)

    def bus_id(self, card: int, device: int) -> str:
        info = PcieInfo()
        self._lib.call("dcmi_get_device_pcie_info_v2", card, device, ctypes.byref(info))
        return f"{info.domain:04x}:{info.bdf_busid:02x}:{info.bdf_deviceid:02x}.{info.bdf_funcid:x}"

    def driver_version(self) -> str:
        return self._lib.text("dcmi_get_driver_version", VERSION_LENGTH)

    def aicore_utilization(self, card: int, device: int) -> int:
        return self._lib.uint("dcmi_get_device_utilization_rate", card, device, INPUT_AICORE)

    def temperature(self, card: int, device: int) -> int:
        return self._lib.sint("dcmi_get_device_temperature", card, device)
